// pmem-client against a live P-Mem server (Node's test runner). The server, its tokens and the
// built client come from the environment tests/agents/test_typescript.py sets:
// PMEM_URL, PMEM_TOKEN (a review token of one namespace), PMEM_APP_TOKEN (an application
// token of the prefix PMEM_APP_PREFIX), PMEM_REVIEW_APP_TOKEN (one of scope review, of the prefix
// PMEM_REVIEW_APP_PREFIX), PMEM_CLIENT_MODULE (the built dist/index.js).
import assert from "node:assert/strict";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

const modulePath = process.env.PMEM_CLIENT_MODULE ?? new URL("../dist/index.js", import.meta.url).pathname;
const pmem = await import(pathToFileURL(modulePath).href);
const { Client, BadRequest, Conflict, NotFound, Unauthorized, PmemError } = pmem;

const baseUrl = process.env.PMEM_URL;
const token = process.env.PMEM_TOKEN;
const appToken = process.env.PMEM_APP_TOKEN;
const prefix = process.env.PMEM_APP_PREFIX;
const memory = new Client({ baseUrl, token });

async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

test("whoami names the token's namespace, and the client learns it", async () => {
  const who = await memory.whoami();
  assert.equal(who.scope, "review");
  assert.equal(memory.namespace, who.namespace);
});

test("remember, correct, retract, history and as of: a round trip", async () => {
  const first = await memory.remember({ facts: [{ key: "alice_city", value: "Paris" }] });
  assert.equal(first.status, "committed");
  assert.deepEqual(first.operations.map((o) => [o.op, o.key, o.value]),
    [["accept", "alice_city", "Paris"]]);
  await pause(20);
  const paris = new Date();
  await pause(20);
  const corrected = await memory.remember({ facts: [{ key: "alice_city", value: "Lisbon" }] });
  assert.equal(corrected.operations[0].ordinal, 2);
  assert.equal((await memory.getFact("alice_city")).value, "Lisbon");
  const undone = await memory.retract("alice_city", "that was her sister");
  assert.equal(undone.operation.op, "revoke");
  assert.equal(undone.cell.value, "Paris"); // the value before it is reinstated
  const history = await memory.factHistory("alice_city");
  assert.deepEqual(history.results.map((h) => [h.value, h.status, h.ordinal]),
    [["Lisbon", "revoked", 2], ["Paris", "active", 1]]);
  assert.deepEqual((await collect(memory.iterHistory("alice_city", { pageSize: 1 })))
    .map((h) => h.value), ["Lisbon", "Paris"]);
  const then = await memory.getFact("alice_city", { asOf: paris });
  assert.equal(then.value, "Paris");
  const read = await memory.recall("where does alice live", { asOf: paris });
  assert.match(read.context, /alice_city = Paris/);
  const log = await collect(memory.operations({ key: "alice_city", pageSize: 1 }));
  assert.deepEqual(log.map((o) => o.op), ["reinstate", "revoke", "accept", "accept"]);
});

test("errors are classes, and an op on a key without a cell writes nothing", async () => {
  await assert.rejects(memory.remember({ facts: [{ key: "x", value: "y", op: "teleport" }] }),
    (e) => e instanceof BadRequest && e.field === "facts[0].op" && e.status === 400);
  const before = (await collect(memory.operations())).length;
  await assert.rejects(memory.retract("never_written", "oops"),
    (e) => e instanceof NotFound && /nothing was written/.test(e.error));
  assert.equal((await collect(memory.operations())).length, before);
  await assert.rejects(memory.getFact("never_written"), NotFound);
  await assert.rejects(new Client({ baseUrl, token: "nope" }).whoami(), Unauthorized);
  await memory.remember({ facts: [{ key: "lamp", value: "on" }] });
  await assert.rejects(memory.resolve("lamp", { value: "off", reason: "not contested" }),
    (e) => e instanceof Conflict && e.reason.length > 0);
});

test("contest, resolve, accept, reject and restore", async () => {
  await memory.remember({ facts: [{ key: "bob_employer", value: "Acme" }] });
  const held = await memory.contest("bob_employer", "Globex", { reason: "a second report" });
  assert.equal(held.cell.status, "contested");
  assert.deepEqual(held.cell.alternatives.map((a) => a.value), ["Globex"]);
  const settled = await memory.resolve("bob_employer", { value: "Globex", reason: "HR" });
  assert.deepEqual([settled.cell.status, settled.cell.value], ["active", "Globex"]);
  const accepted = await memory.accept("bob_employer", "Initech", { metadata: { turn: 7 } });
  assert.deepEqual(accepted.cell.metadata, { turn: 7 });
  const rejected = await memory.reject("bob_employer", { reason: "wrong person" });
  assert.equal(rejected.cell.value, "Globex");
  const initech = rejected.cell.history.find((h) => h.value === "Initech");
  assert.equal(initech.status, "contradicted");
  const restored = await memory.restore("bob_employer", initech.version, { reason: "right" });
  assert.equal(restored.observation, null);
  assert.deepEqual([restored.cell.value, restored.cell.metadata], ["Initech", { turn: 7 }]);
});

test("metadata is kept, filters select by it, minScore cuts", async () => {
  await memory.remember({ facts: [
    { key: "carol_food", value: "sushi", metadata: { user: "carol", stars: 5 } },
    { key: "dave_food", value: "pizza", metadata: { user: "dave", stars: 3 } },
  ] });
  const carol = await memory.recall("food", { filter: { user: "carol" } });
  assert.deepEqual(carol.items.map((i) => [i.key, i.metadata]),
    [["carol_food", { user: "carol", stars: 5 }]]);
  const listed = await collect(memory.cells({ filter: { stars: 3 } }));
  assert.deepEqual(listed.map((c) => c.key), ["dave_food"]);
  assert.deepEqual((await memory.recall("food", { minScore: 1 })).items
    .filter((i) => i.score < 1), []);
  await assert.rejects(memory.recall("food", { mode: "raw", filter: { user: "carol" } }),
    (e) => e instanceof BadRequest && e.field === "filter");
});

test("an application token names each user's namespace, and reaches no other", async () => {
  const app = new Client({ baseUrl, token: appToken });
  assert.equal((await app.whoami()).namespace_prefix, prefix);
  await assert.rejects(app.getFact("food"), (e) => e instanceof PmemError && e.message.includes(prefix));
  await app.remember({ facts: [{ key: "food", value: "sushi" }], namespace: `${prefix}erin` });
  await app.remember({ facts: [{ key: "food", value: "pizza" }], namespace: `${prefix}frank` });
  const frank = new Client({ baseUrl, token: appToken, namespace: `${prefix}frank` });
  assert.equal((await frank.getFact("food")).value, "pizza");
  assert.doesNotMatch((await frank.recall("food")).context, /sushi/);
  assert.equal((await app.getFact("food", { namespace: `${prefix}erin` })).value, "sushi");
  await assert.rejects(app.getFact("food", { namespace: memory.namespace }), NotFound);
  await assert.rejects(
    app.remember({ facts: [{ key: "food", value: "x" }], namespace: `not-${prefix}x` }), NotFound);
});

test("a chat session is one observation, and rememberMany keeps order in chunks", async () => {
  const session = await memory.remember({ messages: [
    { role: "user", name: "Ann", content: "pet_name: Rex", at: new Date("2023-05-08T13:56:00Z") },
    { role: "assistant", content: "Noted." }] });
  assert.equal(session.status, "committed");
  assert.equal(session.text, "[1, 2023-05-08 13:56 UTC] Ann: pet_name: Rex\n[2] assistant: Noted.");
  assert.equal(session.messages[0].at, "2023-05-08T13:56:00Z");
  const items = Array.from({ length: 1200 }, (_, i) => ({
    facts: [{ key: "ts_counter", value: String(i) }], idempotencyKey: `ts-${i}` }));
  const results = await memory.rememberMany(items);
  assert.equal(results.length, 1200);
  assert.ok(results.every((r) => r.status === "committed" && !r.replayed));
  assert.ok(results.every((r, i) => i === 0 || r.seq === results[i - 1].seq + 1 || i === 1000));
  assert.equal((await memory.getFact("ts_counter")).value, "1199");
  const again = await memory.rememberMany(items.slice(0, 3));
  assert.deepEqual(again.map((r) => r.id), results.slice(0, 3).map((r) => r.id));
  assert.ok(again.every((r) => r.replayed));
  await assert.rejects(memory.rememberMany([{ text: "ok" }, { facts: [{ key: "", value: "x" }] }]),
    (err) => err instanceof BadRequest && /observations\[1\]\.facts\[0\]\.key/.test(err.message));
  assert.deepEqual(pmem.batches([1, 2, 3], 2).map((c) => c.length), [2, 1]);
});

test("an application lists, exports and deletes its users' namespaces; facts expire", async () => {
  const reviewer = new Client({ baseUrl, token: process.env.PMEM_REVIEW_APP_TOKEN });
  const ns = `${process.env.PMEM_REVIEW_APP_PREFIX}erin`;
  await reviewer.remember({ namespace: ns, facts: [{ key: "door_code", value: "4711" }],
    ttl: 3600 });
  const fact = await reviewer.getFact("door_code", { namespace: ns });
  assert.equal(fact.value, "4711");
  assert.ok(fact.expires_at && Date.parse(fact.expires_at) > Date.now());
  await assert.rejects(reviewer.remember({ namespace: ns, text: "no facts", ttl: 60 }), PmemError);
  const listed = await collect(reviewer.namespaces());
  assert.deepEqual(listed.map((n) => [n.name, n.cells]), [[ns, 1]]);
  const exported = await reviewer.export({ namespace: ns });
  assert.equal(JSON.parse(exported.split("\n")[0]).namespace, ns);
  assert.ok(exported.includes('"4711"'));
  const gone = await reviewer.deleteNamespace({ namespace: ns, report: true });
  assert.equal(gone.counts.cells, 1);
  await assert.rejects(reviewer.getFact("door_code", { namespace: ns }), NotFound);
  assert.deepEqual(await collect(reviewer.namespaces()), []);
});

test("changes() iterates the feed in commit order and follows new commits", async () => {
  await memory.remember({ facts: [{ key: "feed_probe", value: "one" }] });
  const all = await collect(memory.changes({ pageSize: 3 }));
  const cursors = all.map((e) => e.cursor);
  assert.deepEqual(cursors, [...cursors].sort((a, b) => a - b));
  const last = all[all.length - 1];
  assert.deepEqual([last.op, last.key, last.value], ["accept", "feed_probe", "one"]);
  const follow = memory.changes({ after: last.cursor, wait: 30 });
  const next = follow.next();  // long-polls until the next commit
  await memory.remember({ facts: [{ key: "feed_probe", value: "two" }] });
  const event = (await next).value;
  assert.deepEqual([event.cursor > last.cursor, event.value, event.previous.value],
    [true, "two", "one"]);
  await follow.return();
});
