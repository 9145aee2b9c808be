-- One database per service on one PostgreSQL server (each service owns its
-- tables and its Alembic version table; nothing joins across services).
CREATE DATABASE switchboard_engine;
CREATE DATABASE switchboard_router;
CREATE DATABASE switchboard_threads;
CREATE DATABASE switchboard_memory;
