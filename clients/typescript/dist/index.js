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
import { Conflict, NotFound, ObservationFailed, PmemError, ServerError, Timeout, TransportError, errorFor, } from "./errors.js";
export * from "./errors.js";
const EXPLICIT_OPS = {
    retract: "revoke",
    contest: "contest",
    resolve: "resolve",
    accept: "accept",
    reject: "reject",
};
const RETRY_STATUSES = new Set([429, 500, 502, 503, 504]);
function time(value) {
    return value instanceof Date ? value.toISOString() : value;
}
function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}
function newIdempotencyKey() {
    return `pmem-client-${globalThis.crypto.randomUUID()}`;
}
function retryAfterMs(header) {
    if (!header)
        return undefined;
    const seconds = Number(header.trim());
    if (Number.isFinite(seconds))
        return Math.max(seconds, 0) * 1000;
    const when = Date.parse(header);
    return Number.isNaN(when) ? undefined : Math.max(when - Date.now(), 0);
}
/** The most observations one batch request carries, and about how many bytes of JSON. */
export const BATCH_ITEMS = 1000;
export const BATCH_BYTES = 900_000;
function messagesBody(messages) {
    return messages.map((m) => (m.at === undefined ? { ...m } : { ...m, at: time(m.at) }));
}
function batchItem(item) {
    const body = {
        idempotency_key: item.idempotencyKey ?? newIdempotencyKey(),
    };
    if (item.text !== undefined)
        body.text = item.text;
    if (item.messages !== undefined)
        body.messages = messagesBody(item.messages);
    if (item.facts !== undefined)
        body.facts = item.facts;
    if (item.source !== undefined)
        body.source = item.source;
    if (item.observedAt !== undefined)
        body.observed_at = time(item.observedAt);
    return body;
}
/** Items cut into requests, in order: at most `BATCH_ITEMS` and about `BATCH_BYTES` each. */
export function batches(items, size = BATCH_ITEMS, maxBytes = BATCH_BYTES) {
    const out = [[]];
    let used = 0;
    const encoder = new TextEncoder();
    for (const item of items) {
        const weight = encoder.encode(JSON.stringify(item)).length + 1;
        const last = out[out.length - 1];
        if (last.length && (last.length >= size || used + weight > maxBytes)) {
            out.push([]);
            used = 0;
        }
        out[out.length - 1].push(item);
        used += weight;
    }
    return out.filter((chunk) => chunk.length > 0);
}
function settled(observation) {
    return observation.status === "committed" || observation.status === "failed";
}
/** The P-Mem API: one method per capability, as the Python client's. */
export class Client {
    baseUrl;
    waitTimeoutMs;
    #namespace;
    #prefix = "";
    #headers;
    #retry;
    #timeoutMs;
    #fetch;
    constructor(options) {
        if (!/^https?:\/\//.test(options.baseUrl)) {
            throw new TypeError("baseUrl is the server's root, e.g. http://127.0.0.1:8000");
        }
        this.baseUrl = options.baseUrl.replace(/\/+$/, "") + "/";
        this.#namespace = options.namespace;
        this.#headers = {
            Authorization: `Token ${options.token}`,
            Accept: "application/json",
            "X-Pmem-Channel": options.channel ?? "api",
        };
        this.#retry = {
            attempts: options.retry?.attempts ?? 4,
            backoffMs: options.retry?.backoffMs ?? 250,
            maxBackoffMs: options.retry?.maxBackoffMs ?? 8000,
            maxRetryAfterMs: options.retry?.maxRetryAfterMs ?? 60000,
        };
        this.#timeoutMs = options.timeoutMs ?? 60000;
        this.waitTimeoutMs = options.waitTimeoutMs ?? 120000;
        this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    }
    /** The client's namespace, once given or learnt from `whoami`. */
    get namespace() {
        return this.#namespace;
    }
    // --- transport ---------------------------------------------------------------------------
    #url(call) {
        const url = new URL(call.url, this.baseUrl);
        if (/^https?:/.test(call.url)) {
            // A `next` link the server built: pointed at the server as this client reaches it.
            const base = new URL(this.baseUrl);
            url.protocol = base.protocol;
            url.host = base.host;
        }
        for (const [name, value] of Object.entries(call.params ?? {})) {
            if (value === undefined || value === null)
                continue;
            url.searchParams.set(name, typeof value === "boolean" ? (value ? "1" : "0") : String(value));
        }
        return url.toString();
    }
    async #send(call) {
        for (let attempt = 1;; attempt++) {
            let response;
            try {
                response = await this.#fetch(this.#url(call), {
                    method: call.method,
                    headers: call.json === undefined
                        ? this.#headers
                        : { ...this.#headers, "Content-Type": "application/json" },
                    body: call.json === undefined ? undefined : JSON.stringify(call.json),
                    signal: AbortSignal.timeout(this.#timeoutMs),
                });
            }
            catch (cause) {
                if (attempt < this.#retry.attempts) {
                    await sleep(this.#backoff(attempt));
                    continue;
                }
                const what = `${call.method} ${call.url}`;
                const timedOut = cause instanceof Error && cause.name === "TimeoutError";
                throw timedOut
                    ? new Timeout(`${what}: no answer after ${attempt} tries`)
                    : new TransportError(`${what}: failed after ${attempt} tries (${String(cause)})`);
            }
            const wait = retryAfterMs(response.headers.get("retry-after"));
            if (RETRY_STATUSES.has(response.status) && attempt < this.#retry.attempts) {
                await sleep(wait !== undefined ? Math.min(wait, this.#retry.maxRetryAfterMs)
                    : this.#backoff(attempt));
                continue;
            }
            const text = await response.text();
            let body = text || null;
            if (text && (response.headers.get("content-type") ?? "").includes("json")) {
                try {
                    body = JSON.parse(text);
                }
                catch {
                    body = text;
                }
            }
            if (response.status >= 400) {
                throw errorFor(response.status, body, wait === undefined ? undefined : wait / 1000);
            }
            return body;
        }
    }
    #backoff(attempt) {
        const base = Math.min(this.#retry.backoffMs * 2 ** (attempt - 1), this.#retry.maxBackoffMs);
        return base * (0.5 + Math.random() / 2);
    }
    async #ns(namespace) {
        if (namespace !== undefined)
            return namespace;
        if (this.#namespace === undefined)
            await this.whoami();
        if (this.#namespace !== undefined)
            return this.#namespace;
        throw new PmemError(this.#prefix
            ? `this application token reaches the namespaces whose names start with ` +
                `'${this.#prefix}': name one (namespace on the client or the call)`
            : "the token names no namespace: pass namespace");
    }
    async #nsPath(namespace) {
        return `api/v1/namespaces/${encodeURIComponent(await this.#ns(namespace))}/`;
    }
    async #cellPath(key, namespace) {
        return `${await this.#nsPath(namespace)}cells/${encodeURIComponent(key)}/`;
    }
    // --- capabilities ------------------------------------------------------------------------
    /** The token's namespace (or an application token's `namespace_prefix`), scope, client. */
    async whoami() {
        const who = await this.#send({ method: "GET", url: "api/v1/whoami/" });
        if (this.#namespace === undefined && who.namespace)
            this.#namespace = who.namespace;
        this.#prefix = who.namespace_prefix ?? "";
        return who;
    }
    /**
     * Record an observation: `text` and/or `facts`. Waits until it is committed (its
     * operations say what changed; `facts_found` and `note` say when text yielded nothing)
     * unless `wait: false`. An application token's first write to a namespace creates it.
     */
    async remember(input) {
        const body = {
            idempotency_key: input.idempotencyKey ?? newIdempotencyKey(),
        };
        if (input.text !== undefined)
            body.text = input.text;
        if (input.messages !== undefined)
            body.messages = messagesBody(input.messages);
        const facts = withExpiry(input);
        if (facts !== undefined)
            body.facts = facts;
        if (input.source !== undefined)
            body.source = input.source;
        if (input.observedAt !== undefined)
            body.observed_at = time(input.observedAt);
        const wait = input.wait ?? true;
        const namespace = await this.#ns(input.namespace);
        const recorded = await this.#send({
            method: "POST", url: `${await this.#nsPath(namespace)}observations/`,
            params: { wait }, json: body,
        });
        return wait ? this.#untilSettled(namespace, recorded) : recorded;
    }
    /**
     * Record many observations in order, in batch requests of at most 1,000 (a longer list is
     * sent in chunks, each stored whole or not at all: a bad item is a BadRequest naming its
     * path within its chunk, e.g. `observations[57].facts[0].key`). Each item without an
     * idempotency key gets one, so a resent list stores nothing twice. One result per item
     * (`id`, `seq`, `status`, `replayed`); with `wait` (default true) once committed.
     */
    async rememberMany(observations, options = {}) {
        const wait = options.wait ?? true;
        const url = `${await this.#nsPath(options.namespace)}observations/batch/`;
        const out = [];
        for (const chunk of batches(observations.map(batchItem))) {
            const call = { method: "POST", url, params: { wait }, json: { observations: chunk } };
            let results = (await this.#send(call)).results;
            const first = results;
            let waited = 0;
            let delay = 500;
            // A chunk the server's own wait left unsettled is sent again: its items replay.
            while (wait && !results.every(settled) && waited < this.waitTimeoutMs) {
                await sleep(delay);
                waited += delay;
                delay = Math.min(delay * 1.5, 5000);
                results = (await this.#send(call)).results
                    .map((r, i) => ({ ...r, replayed: first[i].replayed }));
            }
            out.push(...results);
        }
        return out;
    }
    async #untilSettled(namespace, recorded) {
        let waited = 0;
        let delay = 200;
        let current = recorded;
        while (!settled(current) && waited < this.waitTimeoutMs) {
            await sleep(delay);
            waited += delay;
            delay = Math.min(delay * 1.5, 2000);
            current = { ...(await this.observation(current.id, { namespace })),
                replayed: recorded.replayed };
        }
        return current;
    }
    /** An observation's status and, once committed, its operations. */
    async observation(id, options = {}) {
        return this.#send({ method: "GET",
            url: `${await this.#nsPath(options.namespace)}observations/${Math.trunc(id)}/` });
    }
    /**
     * Read memory for a query (`frontier`: current values; `evidence`: the observations that
     * best match by meaning and by the query's words, with `semantic_score` and `lexical_score`,
     * a chat session's item naming the `messages` that matched; `raw`, `raw_ordered`, `pruned`: the evidence by meaning). `asOf` reads the memory as it was
     * then.
     */
    async recall(query, options = {}) {
        const body = { query, mode: options.mode ?? "frontier" };
        if (options.k !== undefined)
            body.k = options.k;
        if (options.asOf !== undefined)
            body.as_of = time(options.asOf);
        if (options.disclose !== undefined)
            body.disclose = options.disclose;
        if (options.filter !== undefined && Object.keys(options.filter).length) {
            body.filter = options.filter;
        }
        if (options.minScore !== undefined)
            body.min_score = options.minScore;
        return this.#send({ method: "POST", url: `${await this.#nsPath(options.namespace)}read/`,
            json: body });
    }
    /**
     * The server's model answers `query` from a read in `mode` (`iterative` too); it needs a
     * model configured on the server (PMEM_LLM_BASE_URL): Conflict otherwise.
     */
    async answer(query, options = {}) {
        const body = { query, mode: options.mode ?? "frontier" };
        if (options.k !== undefined)
            body.k = options.k;
        if (options.disclose !== undefined)
            body.disclose = options.disclose;
        return this.#send({ method: "POST", url: `${await this.#nsPath(options.namespace)}answer/`,
            json: body });
    }
    /** A cell: value, status, alternatives and newest history. Throws NotFound. */
    async getFact(key, options = {}) {
        return this.#send({ method: "GET", url: await this.#cellPath(key, options.namespace),
            params: { as_of: time(options.asOf), history: options.history } });
    }
    /** One page of a key's history, newest first; pass `next` as `before`. */
    async factHistory(key, options = {}) {
        return this.#send({ method: "GET",
            url: `${await this.#cellPath(key, options.namespace)}history/`,
            params: { limit: options.limit ?? 50, before: options.before, as_of: time(options.asOf),
                search: options.search } });
    }
    /** Every version of a key, newest first, page by page. */
    async *iterHistory(key, options = {}) {
        let before;
        for (;;) {
            const page = await this.factHistory(key, { ...options, limit: options.pageSize ?? 200,
                before });
            yield* page.results;
            if (!page.next)
                return;
            before = page.next;
        }
    }
    /**
     * Retract the key's current value (or the non-head `version`: its id, or the key's own
     * ordinal as `"v2"`): the previous value is reinstated. Conflict with the reason when invalid in the cell's state; NotFound, with
     * nothing written, when the key has no cell.
     */
    async retract(key, reason, options = {}) {
        return this.#explicit("retract", { key, reason, version: options.version }, options);
    }
    /** Hold `value` open beside the current one: the cell becomes contested. */
    async contest(key, value, options = {}) {
        return this.#explicit("contest", { key, value, reason: options.reason,
            metadata: options.metadata }, options);
    }
    /** Settle a contested cell on `value` (or `version`: its id, or the ordinal as `"v2"`). */
    async resolve(key, options) {
        return this.#explicit("resolve", { key, value: options.value, version: options.version,
            reason: options.reason }, options);
    }
    /** Make `value` current whatever the memory would have decided; the old one is kept. */
    async accept(key, value, options = {}) {
        return this.#explicit("accept", { key, value, reason: options.reason,
            metadata: options.metadata }, options);
    }
    /**
     * The current value contradicts the world: with `value`, that one replaces it; without,
     * the previous value is reinstated.
     */
    async reject(key, options) {
        return this.#explicit("reject", { key, value: options.value, reason: options.reason,
            metadata: options.metadata }, options);
    }
    /**
     * Undo a retraction or rejection: that version's value (its id, or the key's ordinal as
     * `"v2"`) is current again (scope review), starting from its metadata, `metadata` over it.
     */
    async restore(key, version, options = {}) {
        const answer = await this.#send({
            method: "POST", url: `${await this.#cellPath(key, options.namespace)}operations/`,
            json: { op: "restore", version, ...(options.reason ? { reason: options.reason } : {}),
                ...(options.metadata ? { metadata: options.metadata } : {}) },
        });
        return { operation: answer.operation, cell: answer.cell, observation: null };
    }
    async #explicit(capability, fact, options) {
        const namespace = await this.#ns(options.namespace);
        const needsCell = capability === "retract" || capability === "contest" ||
            capability === "resolve" || (capability === "reject" && fact.value === undefined);
        if (needsCell) {
            try {
                await this.getFact(fact.key, { namespace, history: 0 });
            }
            catch (missing) {
                if (!(missing instanceof NotFound))
                    throw missing;
                throw new NotFound(`no cell with key '${fact.key}': nothing to ${capability} ` +
                    "(nothing was written)", 404, missing.body);
            }
        }
        const op = EXPLICIT_OPS[capability];
        const sent = { key: fact.key, op };
        for (const name of ["value", "version", "reason", "metadata"]) {
            if (fact[name] !== undefined && fact[name] !== "")
                sent[name] = fact[name];
        }
        const done = await this.remember({ facts: [sent], namespace,
            idempotencyKey: options.idempotencyKey });
        if (done.status === "failed")
            throw new ObservationFailed(done);
        if (done.status !== "committed") {
            throw new Timeout(`observation ${done.id} is still ${done.status}; ask for it later`, done);
        }
        const operation = (done.operations ?? []).find((o) => o.requested === op && o.op !== "reinstate");
        if (!operation)
            throw new ServerError(`observation ${done.id} recorded no ${op}`, 500, done);
        if (operation.op === "noop") {
            throw new Conflict(operation.reason || `${op} changed nothing`, 409, done, done);
        }
        let cell = null;
        try {
            cell = await this.getFact(operation.key, { namespace });
        }
        catch (gone) {
            if (!(gone instanceof NotFound))
                throw gone; // erased since: the operation stands
        }
        return { operation, cell, observation: done };
    }
    async *#pages(first) {
        let call = first;
        while (call) {
            const page = await this.#send(call);
            yield* page.results;
            call = page.next ? { method: "GET", url: page.next } : undefined;
        }
    }
    /** The operation log, newest first, page by page as you iterate. */
    async *operations(options = {}) {
        yield* this.#pages({ method: "GET",
            url: `${await this.#nsPath(options.namespace)}operations/`,
            params: { key: options.key, key_contains: options.keyContains, op: options.op,
                actor: options.actor, source: options.source, limit: options.pageSize } });
    }
    /**
     * The change feed (SPEC §12): every committed operation after the cursor `after` (none: from
     * the oldest kept), in commit order. Without `wait` it ends at the newest event; with `wait`
     * (seconds) it never ends: each time it has caught up it long-polls for the next commit.
     * Resume a broken iteration with `after` = the last event's cursor.
     */
    async *changes(options = {}) {
        // One request waits at most 45 s, below the default request time limit.
        const wait = options.wait === undefined ? undefined
            : Math.max(0, Math.min(45, Math.round(options.wait)));
        let call = { method: "GET", url: `${await this.#nsPath(options.namespace)}changes/`,
            params: { after: options.after, limit: options.pageSize, wait } };
        for (;;) {
            const page = await this.#send(call);
            yield* page.results;
            if (!page.results.length && wait === undefined)
                return;
            // Nothing came: the wait ran out, or the server had no thread to spare for it and
            // answered at once. A pause, so that a busy server is not asked in a tight loop.
            if (!page.results.length)
                await new Promise((resolve) => setTimeout(resolve, 1000));
            call = { method: "GET", url: page.next };
        }
    }
    /** The frontier: every cell (or those with `status`, or matching `filter`), by key. */
    async *cells(options = {}) {
        const filter = options.filter && Object.keys(options.filter).length
            ? JSON.stringify(options.filter) : undefined;
        yield* this.#pages({ method: "GET", url: `${await this.#nsPath(options.namespace)}cells/`,
            params: { status: options.status, search: options.search, as_of: time(options.asOf),
                limit: options.pageSize, filter } });
    }
    /** The namespaces this token reaches (an application token: those of its prefix), by name. */
    async *namespaces(options = {}) {
        yield* this.#pages({ method: "GET", url: "api/v1/namespaces/",
            params: { limit: options.pageSize } });
    }
    /**
     * Delete the namespace and everything in it (SPEC §13; scope `review`): it answers 404
     * afterwards and its name starts empty.
     */
    async deleteNamespace(options = {}) {
        const answer = await this.#send({ method: "DELETE",
            url: await this.#nsPath(options.namespace),
            params: options.report ? { report: "1" } : undefined });
        return options.report ? answer : null;
    }
    /** The namespace as NDJSON (what `pmem_import` reads back; scope `review`). */
    async export(options = {}) {
        const body = await this.#send({ method: "GET",
            url: `${await this.#nsPath(options.namespace)}export/` });
        return typeof body === "string" ? body : `${JSON.stringify(body)}\n`;
    }
    /** Privacy erase (SPEC §6): the key and its values are gone for good. */
    async erase(key, options = {}) {
        const answer = await this.#send({ method: "DELETE",
            url: await this.#cellPath(key, options.namespace),
            params: options.report ? { report: "1" } : undefined });
        return options.report ? answer : null;
    }
}
/** The facts, each with the call's `ttl` or `expiresAt` unless it carries its own. */
function withExpiry(input) {
    const { facts, ttl, expiresAt } = input;
    if (ttl === undefined && expiresAt === undefined)
        return facts;
    if (ttl !== undefined && expiresAt !== undefined) {
        throw new PmemError("give ttl or expiresAt, not both");
    }
    if (!facts?.length)
        throw new PmemError("ttl and expiresAt apply to facts: pass facts");
    const extra = ttl !== undefined ? { ttl } : { expires_at: time(expiresAt) };
    return facts?.map((f) => ("ttl" in f || "expires_at" in f ? f : { ...f, ...extra }));
}
