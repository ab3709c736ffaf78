/**
 * One error class per kind of answer the P-Mem API can give, as in the Python client: catch
 * what you can handle (`if (e instanceof Conflict) e.reason`).
 */
/** Anything that went wrong talking to P-Mem. */
export declare class PmemError extends Error {
    constructor(message: string);
}
/** The server answered with an error status; `error` is its message, `body` its JSON. */
export declare class ApiError extends PmemError {
    readonly error: string;
    readonly status: number;
    readonly body: unknown;
    constructor(error: string, status: number, body?: unknown);
}
/** 400: the request was refused as malformed; `field` names the input at fault. */
export declare class BadRequest extends ApiError {
    get field(): string | undefined;
}
/** 401: no token, an unknown token, or a revoked one. */
export declare class Unauthorized extends ApiError {
}
/** 403: the token is valid but its scope (or its sources) do not allow this. */
export declare class Forbidden extends ApiError {
}
/** 404: no such cell, observation or namespace (another namespace's answers 404 too). */
export declare class NotFound extends ApiError {
}
/**
 * 409, or an explicit operation recorded as invalid (a noop, SPEC §3): `reason` says why it
 * was refused in the cell's state; `observation` is the recorded observation then.
 */
export declare class Conflict extends ApiError {
    readonly observation: unknown;
    constructor(error: string, status: number, body?: unknown, observation?: unknown);
    get reason(): string;
}
/** 409: the idempotency key was used before, in this namespace, for another request. */
export declare class IdempotencyConflict extends Conflict {
    get observationId(): number | undefined;
}
/** 413: the body is over the server's limit. */
export declare class PayloadTooLarge extends ApiError {
}
/** 414 or 431: the request line or its headers are over the web server's limits. */
export declare class RequestTooLong extends ApiError {
}
/** 429, still refused after the client's retries; `retryAfter` in seconds, if given. */
export declare class RateLimited extends ApiError {
    readonly retryAfter: number | undefined;
    constructor(error: string, status: number, body?: unknown, retryAfter?: number);
}
/** 5xx, still failing after the client's retries. */
export declare class ServerError extends ApiError {
}
/** The server could not be reached, or the connection broke, after the client's retries. */
export declare class TransportError extends PmemError {
}
/** No answer in time; or an observation still not committed when a call gave up waiting. */
export declare class Timeout extends TransportError {
    readonly observation: unknown;
    constructor(message: string, observation?: unknown);
}
/** The observation was stored but could not be committed (`observation.error` says why). */
export declare class ObservationFailed extends PmemError {
    readonly observation: {
        id: number;
        error?: string;
    };
    constructor(observation: {
        id: number;
        error?: string;
    });
}
/** The error for an error answer (`body`: its parsed JSON, or its text). */
export declare function errorFor(status: number, body: unknown, retryAfter?: number): ApiError;
