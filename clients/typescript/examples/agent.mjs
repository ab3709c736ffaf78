// An agent's memory from Node: remember, correct, look back.
//   PMEM_TOKEN=pmem_… node examples/agent.mjs          (after `npm run build`)
import { Client, NotFound } from "../dist/index.js";

const memory = new Client({
  baseUrl: process.env.PMEM_URL ?? "http://127.0.0.1:8000",
  token: process.env.PMEM_TOKEN,
});

const before = new Date();
await memory.remember({ facts: [{ key: "user_city", value: "Paris", metadata: { topic: "home" } }] });
await memory.remember({ text: "user_city = Lisbon" }); // the rule extractor reads `key = value`
console.log((await memory.recall("where does the user live?")).context);

const undone = await memory.retract("user_city", "the user was talking about their sister");
console.log("now:", undone.cell?.value); // Paris: the value before is reinstated

for await (const version of memory.iterHistory("user_city")) {
  console.log(`v${version.ordinal}`, version.value, version.status);
}
console.log("as of start:", (await memory.getFact("user_city", { asOf: before })).status); // empty

try {
  await memory.retract("never_written", "nothing there");
} catch (error) {
  if (!(error instanceof NotFound)) throw error; // nothing was written
}
