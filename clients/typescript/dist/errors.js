/**
 * One error class per kind of answer the P-Mem API can give, as in the Python client: catch
 * what you can handle (`if (e instanceof Conflict) e.reason`).
 */
/** Anything that went wrong talking to P-Mem. */
export class PmemError extends Error {
    constructor(message) {
        super(message);
        this.name = new.target.name;
    }
}
/** The server answered with an error status; `error` is its message, `body` its JSON. */
export class ApiError extends PmemError {
    error;
    status;
    body;
    constructor(error, status, body) {
        super(`${status}: ${error}`);
        this.error = error;
        this.status = status;
        this.body = body;
    }
}
/** 400: the request was refused as malformed; `field` names the input at fault. */
export class BadRequest extends ApiError {
    get field() {
        const field = this.body?.field;
        return typeof field === "string" ? field : undefined;
    }
}
/** 401: no token, an unknown token, or a revoked one. */
export class Unauthorized extends ApiError {
}
/** 403: the token is valid but its scope (or its sources) do not allow this. */
export class Forbidden extends ApiError {
}
/** 404: no such cell, observation or namespace (another namespace's answers 404 too). */
export class NotFound extends ApiError {
}
/**
 * 409, or an explicit operation recorded as invalid (a noop, SPEC §3): `reason` says why it
 * was refused in the cell's state; `observation` is the recorded observation then.
 */
export class Conflict extends ApiError {
    observation;
    constructor(error, status, body, observation) {
        super(error, status, body);
        this.observation = observation;
    }
    get reason() {
        return this.error;
    }
}
/** 409: the idempotency key was used before, in this namespace, for another request. */
export class IdempotencyConflict extends Conflict {
    get observationId() {
        const first = this.body?.observation;
        return typeof first === "number" ? first : undefined;
    }
}
/** 413: the body is over the server's limit. */
export class PayloadTooLarge extends ApiError {
}
/** 414 or 431: the request line or its headers are over the web server's limits. */
export class RequestTooLong extends ApiError {
}
/** 429, still refused after the client's retries; `retryAfter` in seconds, if given. */
export class RateLimited extends ApiError {
    retryAfter;
    constructor(error, status, body, retryAfter) {
        super(error, status, body);
        this.retryAfter = retryAfter;
    }
}
/** 5xx, still failing after the client's retries. */
export class ServerError extends ApiError {
}
/** The server could not be reached, or the connection broke, after the client's retries. */
export class TransportError extends PmemError {
}
/** No answer in time; or an observation still not committed when a call gave up waiting. */
export class Timeout extends TransportError {
    observation;
    constructor(message, observation) {
        super(message);
        this.observation = observation;
    }
}
/** The observation was stored but could not be committed (`observation.error` says why). */
export class ObservationFailed extends PmemError {
    observation;
    constructor(observation) {
        super(`observation ${observation.id} failed: ${observation.error ?? ""}`);
        this.observation = observation;
    }
}
function message(status, body) {
    if (body && typeof body === "object" && typeof body.error === "string") {
        return body.error;
    }
    if (typeof body === "string" && body.trim()) {
        const text = body.trim();
        if (text.startsWith("<")) {
            const title = /<title>\s*([^<]{1,200}?)\s*<\/title>/i.exec(text);
            return `HTTP ${status}` + (title ? `: ${title[1]}` : "");
        }
        return text.slice(0, 500);
    }
    return `HTTP ${status}`;
}
/** The error for an error answer (`body`: its parsed JSON, or its text). */
export function errorFor(status, body, retryAfter) {
    const text = message(status, body);
    const field = body?.field;
    switch (status) {
        case 400:
            return new BadRequest(text, status, body);
        case 401:
            return new Unauthorized(text, status, body);
        case 403:
            return new Forbidden(text, status, body);
        case 404:
            return new NotFound(text, status, body);
        case 409:
            return field === "idempotency_key"
                ? new IdempotencyConflict(text, status, body)
                : new Conflict(text, status, body);
        case 413:
            return new PayloadTooLarge(text, status, body);
        case 414:
        case 431:
            return new RequestTooLong(text, status, body);
        case 429:
            return new RateLimited(text, status, body, retryAfter);
        default:
            return status >= 500 ? new ServerError(text, status, body) : new ApiError(text, status, body);
    }
}
