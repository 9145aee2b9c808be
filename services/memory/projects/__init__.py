"""Projects and their members: who may read and write a project's durable
notes, context and live state, and ask its agents. The memory service holds
them because it holds most of what a project shares; the threads service
asks it (CheckProjectAccess) about agents."""
