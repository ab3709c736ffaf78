/**
 * pmem-client: the P-Mem API from TypeScript and JavaScript (Node 20+ and browsers), with
 * the methods of the Python client (CONTRACT "Framework integrations and clients").
 *
 * ```ts
 * import { Client } from "pmem-client";
 * const memory = new Client({ baseUrl: "http://127.0.0.1:8000", token });
 * await memory.remember({ facts: [{ key: "mug_1_location", value: "shelf 2" }] });
 * (await memory.getFact("mug_1_location")).value; // "shelf 2"
 * ```
 *
 * No runtime dependency: requests go through `fetch`. The result types are generated from the
 * OpenAPI schema the server serves (`src/schema.ts`).
 */
import type { components } from "./schema.js";
export * from "./errors.js";
export type { components, paths } from "./schema.js";
type Schemas = components["schemas"];
export type Whoami = Schemas["WhoAmIOut"];
export type Observation = Schemas["ObservationOut"];
export type ObservationOperation = Schemas["OperationSummaryOut"];
export type Cell = Schemas["CellOut"];
export type Alternative = Schemas["AlternativeOut"];
export type HistoryEntry = Schemas["VersionOut"];
export type HistoryPage = Schemas["HistoryPageOut"];
export type Operation = Schemas["OperationOut"];
export type ReadResult = Schemas["ReadOut"];
export type AnswerResult = Schemas["AnswerOut"];
export type AnswerMode = Schemas["AnswerInModeEnum"];
export type EraseReport = Schemas["EraseReportOut"];
export type Graph = Schemas["GraphOut"];
/** One committed operation of the change feed (SPEC §12), ordered by its `cursor`. */
export type ChangeEvent = Schemas["ChangeEventOut"];
/** A version as the API takes it: its id, or the key's own ordinal as `"v3"`. */
export type VersionRef = number | `v${number}`;
/** A namespace the token reaches, with how many keys it holds and when it was last written. */
export type NamespaceInfo = Schemas["NamespaceRowOut"];
/** After a namespace's deletion with `report: true`: what it held. */
export type NamespaceDeleted = Schemas["NamespaceDeletedOut"];
/** A flat object of strings, numbers and booleans kept with the version a fact creates. */
export type Metadata = Record<string, string | number | boolean>;
/** A fact to remember: `{ key, value }`, with an `op` to force one, `metadata` to keep,
 * `annotate: true` to have the memory's model decide how it relates to the current value. */
export type Fact = Omit<Schemas["FactInRequest"], "hard_commit" | "annotate" | "metadata"> & {
    hard_commit?: boolean;
    annotate?: boolean;
    metadata?: Metadata | null;
};
/** One turn of a chat session: `at` is ISO-8601 with a zone (or a Date). */
export type Message = Omit<Schemas["MessageInRequest"], "at"> & {
    at?: string | Date;
};
/** One result of `rememberMany`, in the order sent. */
export type BatchResult = Schemas["ObservationAcceptedOut"];
export type ReadMode = Schemas["ReadInModeEnum"];
export type Disclosure = Schemas["DiscloseEnum"];
/** What `retract`, `contest`, `resolve`, `accept`, `reject` and `restore` give back. */
export interface OperationResult {
    operation: ObservationOperation;
    cell: Cell | null;
    /** The observation that carried it (null for `restore`, a reviewer's operation). */
    observation: Observation | null;
}
/** How often and how long to retry a 429, a 5xx, a timeout or a broken connection. */
export interface RetryOptions {
    /** Every try counted (1: never retry). Default 4. */
    attempts?: number;
    /** First backoff in ms, doubled each time (with jitter). Default 250. */
    backoffMs?: number;
    maxBackoffMs?: number;
    /** The longest `Retry-After` honoured, in ms. Default 60000. */
    maxRetryAfterMs?: number;
}
export interface ClientOptions {
    /** The server's root, e.g. `http://127.0.0.1:8000`. */
    baseUrl: string;
    token: string;
    /**
     * The namespace calls act on unless they name one; default the token's (asked once from
     * `whoami`). An application token reaches every namespace of its prefix: name one here or
     * on each call.
     */
    namespace?: string;
    /** The label writes are signed with (`api:<client>`). */
    channel?: "api" | "mcp";
    retry?: RetryOptions;
    /** One request's time limit. Default 60000 (above the server's 30 s wait). */
    timeoutMs?: number;
    /** How long `remember` and the operations poll an observation left pending. */
    waitTimeoutMs?: number;
    /** The fetch to use (default the global one). */
    fetch?: typeof fetch;
}
export interface Scoped {
    /** The namespace of this call (else the client's). */
    namespace?: string;
}
/** One observation of `rememberMany`: `remember`'s fields, without `wait`. */
export interface ObservationInput {
    text?: string;
    /** A chat session, recorded as one observation and read as its transcript (at most 500). */
    messages?: Message[];
    facts?: Fact[];
    source?: string;
    observedAt?: string | Date;
    /** Made per item when left out: a resent list never stores an item twice. */
    idempotencyKey?: string;
}
export interface RememberInput extends Scoped {
    text?: string;
    /** A chat session, recorded as one observation and read as its transcript (at most 500);
     * `observedAt` defaults to the last `at`. */
    messages?: Message[];
    facts?: Fact[];
    source?: string;
    /** When it was true in the world (ISO-8601 with a zone, or a Date). */
    observedAt?: string | Date;
    /** Wait until committed (default true). */
    wait?: boolean;
    /** Made per call when left out: the client's retries never store it twice. */
    idempotencyKey?: string;
    /** Seconds: every fact without its own expiry is never current after that long. */
    ttl?: number;
    /** ISO-8601 with a zone, or a Date: every fact without its own expiry ends then. */
    expiresAt?: string | Date;
}
export interface RecallOptions extends Scoped {
    mode?: ReadMode;
    k?: number;
    asOf?: string | Date;
    disclose?: Disclosure[];
    /** frontier: only facts whose current version's metadata holds each entry. */
    filter?: Metadata;
    /** Drop items scored below this (cosine similarity of query and item, -1 to 1). */
    minScore?: number;
}
export interface OpOptions extends Scoped {
    idempotencyKey?: string;
}
/** The most observations one batch request carries, and about how many bytes of JSON. */
export declare const BATCH_ITEMS = 1000;
export declare const BATCH_BYTES = 900000;
/** Items cut into requests, in order: at most `BATCH_ITEMS` and about `BATCH_BYTES` each. */
export declare function batches<T>(items: T[], size?: number, maxBytes?: number): T[][];
/** The P-Mem API: one method per capability, as the Python client's. */
export declare class Client {
    #private;
    readonly baseUrl: string;
    readonly waitTimeoutMs: number;
    constructor(options: ClientOptions);
    /** The client's namespace, once given or learnt from `whoami`. */
    get namespace(): string | undefined;
    /** The token's namespace (or an application token's `namespace_prefix`), scope, client. */
    whoami(): Promise<Whoami>;
    /**
     * Record an observation: `text` and/or `facts`. Waits until it is committed (its
     * operations say what changed; `facts_found` and `note` say when text yielded nothing)
     * unless `wait: false`. An application token's first write to a namespace creates it.
     */
    remember(input: RememberInput): Promise<Observation>;
    /**
     * Record many observations in order, in batch requests of at most 1,000 (a longer list is
     * sent in chunks, each stored whole or not at all: a bad item is a BadRequest naming its
     * path within its chunk, e.g. `observations[57].facts[0].key`). Each item without an
     * idempotency key gets one, so a resent list stores nothing twice. One result per item
     * (`id`, `seq`, `status`, `replayed`); with `wait` (default true) once committed.
     */
    rememberMany(observations: ObservationInput[], options?: Scoped & {
        wait?: boolean;
    }): Promise<BatchResult[]>;
    /** An observation's status and, once committed, its operations. */
    observation(id: number, options?: Scoped): Promise<Observation>;
    /**
     * Read memory for a query (`frontier`: current values; `evidence`: the observations that
     * best match by meaning and by the query's words, with `semantic_score` and `lexical_score`,
     * a chat session's item naming the `messages` that matched; `raw`, `raw_ordered`, `pruned`: the evidence by meaning). `asOf` reads the memory as it was
     * then.
     */
    recall(query: string, options?: RecallOptions): Promise<ReadResult>;
    /**
     * The server's model answers `query` from a read in `mode` (`iterative` too); it needs a
     * model configured on the server (PMEM_LLM_BASE_URL): Conflict otherwise.
     */
    answer(query: string, options?: Scoped & {
        mode?: AnswerMode;
        k?: number;
        disclose?: Disclosure[];
    }): Promise<AnswerResult>;
    /** A cell: value, status, alternatives and newest history. Throws NotFound. */
    getFact(key: string, options?: Scoped & {
        asOf?: string | Date;
        history?: number;
    }): Promise<Cell>;
    /** One page of a key's history, newest first; pass `next` as `before`. */
    factHistory(key: string, options?: Scoped & {
        limit?: number;
        before?: string;
        asOf?: string | Date;
        search?: string;
    }): Promise<HistoryPage>;
    /** Every version of a key, newest first, page by page. */
    iterHistory(key: string, options?: Scoped & {
        asOf?: string | Date;
        pageSize?: number;
    }): AsyncGenerator<HistoryEntry>;
    /**
     * Retract the key's current value (or the non-head `version`: its id, or the key's own
     * ordinal as `"v2"`): the previous value is reinstated. Conflict with the reason when invalid in the cell's state; NotFound, with
     * nothing written, when the key has no cell.
     */
    retract(key: string, reason: string, options?: OpOptions & {
        version?: VersionRef;
    }): Promise<OperationResult>;
    /** Hold `value` open beside the current one: the cell becomes contested. */
    contest(key: string, value: string, options?: OpOptions & {
        reason?: string;
        metadata?: Metadata;
    }): Promise<OperationResult>;
    /** Settle a contested cell on `value` (or `version`: its id, or the ordinal as `"v2"`). */
    resolve(key: string, options: OpOptions & {
        value?: string;
        version?: VersionRef;
        reason: string;
    }): Promise<OperationResult>;
    /** Make `value` current whatever the memory would have decided; the old one is kept. */
    accept(key: string, value: string, options?: OpOptions & {
        reason?: string;
        metadata?: Metadata;
    }): Promise<OperationResult>;
    /**
     * The current value contradicts the world: with `value`, that one replaces it; without,
     * the previous value is reinstated.
     */
    reject(key: string, options: OpOptions & {
        value?: string;
        reason: string;
        metadata?: Metadata;
    }): Promise<OperationResult>;
    /**
     * Undo a retraction or rejection: that version's value (its id, or the key's ordinal as
     * `"v2"`) is current again (scope review), starting from its metadata, `metadata` over it.
     */
    restore(key: string, version: VersionRef, options?: Scoped & {
        reason?: string;
        metadata?: Metadata;
    }): Promise<OperationResult>;
    /** The operation log, newest first, page by page as you iterate. */
    operations(options?: Scoped & {
        key?: string;
        keyContains?: string;
        op?: string;
        actor?: string;
        source?: string;
        pageSize?: number;
    }): AsyncGenerator<Operation>;
    /**
     * The change feed (SPEC §12): every committed operation after the cursor `after` (none: from
     * the oldest kept), in commit order. Without `wait` it ends at the newest event; with `wait`
     * (seconds) it never ends: each time it has caught up it long-polls for the next commit.
     * Resume a broken iteration with `after` = the last event's cursor.
     */
    changes(options?: Scoped & {
        after?: number;
        wait?: number;
        pageSize?: number;
    }): AsyncGenerator<ChangeEvent>;
    /** The frontier: every cell (or those with `status`, or matching `filter`), by key. */
    cells(options?: Scoped & {
        status?: "active" | "contested" | "empty";
        search?: string;
        asOf?: string | Date;
        filter?: Metadata;
        pageSize?: number;
    }): AsyncGenerator<Cell>;
    /** The namespaces this token reaches (an application token: those of its prefix), by name. */
    namespaces(options?: {
        pageSize?: number;
    }): AsyncGenerator<NamespaceInfo>;
    /**
     * Delete the namespace and everything in it (SPEC §13; scope `review`): it answers 404
     * afterwards and its name starts empty.
     */
    deleteNamespace(options?: Scoped & {
        report?: boolean;
    }): Promise<NamespaceDeleted | null>;
    /** The namespace as NDJSON (what `pmem_import` reads back; scope `review`). */
    export(options?: Scoped): Promise<string>;
    /** Privacy erase (SPEC §6): the key and its values are gone for good. */
    erase(key: string, options?: Scoped & {
        report?: boolean;
    }): Promise<EraseReport | null>;
}
