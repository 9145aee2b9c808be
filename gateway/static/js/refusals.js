// An API refusal in words for the reader. A quota's 429 says which quota, in
// the interface's language, and when to try again (its Retry-After); a 403
// says who may do it (a project's role, or an agent's owner); any other
// refusal keeps the gateway's own message.

import { t, tLater } from "./i18n.js";

// The quota reasons the API answers with 429 (docs/api.md, "Errors").
export const QUOTA_TEXT = {
  ERROR_REASON_RATE_LIMITED: tLater("You started too many requests in the last minute."),
  ERROR_REASON_TOO_MANY_RUNS: tLater("You have too many requests in progress: wait for one to end, or stop one."),
  ERROR_REASON_QUOTA_EXCEEDED: tLater("Your memory is full here: delete or decide something first."),
};

// The seconds to wait: the body's retry_after_seconds, else the Retry-After header.
function retryAfter(error, headers) {
  const fromBody = Number(error.retry_after_seconds);
  if (Number.isFinite(fromBody) && fromBody > 0) return Math.ceil(fromBody);
  const fromHeader = Number(headers?.get("Retry-After"));
  return Number.isFinite(fromHeader) && fromHeader > 0 ? Math.ceil(fromHeader) : null;
}

// The routes whose 403 is a matter of the caller's role in a project (the
// others' is a matter of an agent's owner or an admin).
const PROJECT_ROUTES = /\/(projects|notes|note-proposals|project-context|live-state)(\/|\?|$)/;

function refusedFor(response) {
  let path = "";
  try {
    path = new URL(response.url).pathname;
  } catch {
    path = "";
  }
  return PROJECT_ROUTES.test(path)
    ? t("Not allowed: your role in this project does not permit this.")
    : t("Not allowed: this needs an admin, or the agent's owner to add you as a member.");
}

// The message of a failed response: ``body`` its parsed JSON ({} when none).
export function refusalMessage(response, body) {
  // The gateway's shape is {"error": {...}}; a bare {"detail"} is read too.
  const detail = body && typeof body.detail === "string" ? { message: body.detail, reason: "" } : null;
  const error = body && body.error ? body.error : detail;
  if (!error) return `${response.status} ${response.statusText}`;
  if (response.status === 403) return `${refusedFor(response)} (${error.message})`;
  const sentence = response.status === 429 ? QUOTA_TEXT[error.reason] : undefined;
  if (!sentence) return error.message;
  const wait = retryAfter(error, response.headers);
  const when = wait === null ? "" : ` ${t("Try again in {seconds} s.", { seconds: wait })}`;
  // Which memory quota is full is in the API's words only (in English).
  const which = error.reason === "ERROR_REASON_QUOTA_EXCEEDED" && error.message ? ` (${error.message})` : "";
  return `${t(sentence)}${when}${which}`;
}
