#!/usr/bin/env node
// Runs an `lmtrain export --format gguf` file in llama.cpp itself (node-llama-cpp@3.21.1's prebuilt CPU
// binaries) and compares what llama.cpp computes with what lmtrain computed. Every check that is asked for must
// hold, else exit 1; exit 77 when node-llama-cpp is not found (what was searched and how to install it are
// printed). docs/llama-cpp.md "Checking an export" explains the figures. node-llama-cpp is looked for in
// --modules DIR, then in each directory of NODE_PATH, then in a clone's build/llama-node/node_modules (where
// scripts/setup.sh installs it).
//
// Usage: node check_gguf.mjs --model MODEL.gguf [--modules DIR]
//          [--probs PROBS.json [--tolerance T]]   `lmtrain inspect probs --json -k K` of the same checkpoint: every
//                                                 position's top-K probabilities within T (default 1e-3) of llama.cpp's
//          [--text TEXT]                          llama.cpp's tokenization of TEXT = the ids PROBS.json fed (after </s>)
//          [--greedy N --expect "ID ..."]         llama.cpp's greedy N tokens after PROBS.json's ids = these ids
//                                                 (`lmtrain sample --temperature 0 --generate N --show-ids`)
//          [--loss VAL.bin [--windows W]]         mean next-token loss over W of the token file's windows of T + 1
//                                                 ids (window k starts at k*T), evenly spread as lmtrain's validation
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = {tolerance: "1e-3"};
for (let i = 2; i < process.argv.length; i += 2) {
  if (!process.argv[i].startsWith("--") || i + 1 >= process.argv.length) {
    console.error(`check_gguf: expected --key value pairs, got '${process.argv[i]}'`);
    process.exit(2);
  }
  const key = process.argv[i].slice(2);
  if (!["model", "modules", "probs", "tolerance", "text", "greedy", "expect", "loss", "windows"].includes(key)) {
    console.error(`check_gguf: unknown option --${key}` + (key === "node-modules" ? " (it is --modules now)" : ""));
    process.exit(2);
  }
  args[key] = process.argv[i + 1];
}
if (!args.model) {
  console.error("check_gguf: expected --model MODEL.gguf");
  process.exit(2);
}
const places = [args.modules, ...(process.env.NODE_PATH ?? "").split(path.delimiter),
                path.join(here, "..", "build", "llama-node", "node_modules")].filter((d) => d);
const found = places.find((d) => fs.existsSync(path.join(d, "node-llama-cpp", "dist", "index.js")));
if (!found) {
  console.log(`SKIP: node-llama-cpp is not found (looked in ${places.join(", ")}). Install it with node >= 20: ` +
              "npm install --prefix DIR node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1, then pass " +
              "--modules DIR/node_modules (in a clone, scripts/setup.sh does this into build/llama-node)");
  process.exit(77);
}
const entry = path.join(found, "node-llama-cpp", "dist", "index.js");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(entry).href);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: args.model});
const T = model.trainContextSize;
console.log(`load: ${args.model} (${model.fileInfo.metadata.general.architecture}, context ${T}, ` +
            `${model.fileInfo.metadata.gpt2?.block_count ?? "?"} blocks)`);
let failed = false;
const fail = (line) => { console.log(`FAIL ${line}`); failed = true; };

// Each evaluation gets a fresh context of the training length: a reused sequence, or a context sized from the
// id count, shifts the last positions' probabilities in node-llama-cpp.
async function nextTokenProbabilities(ids) {
  const context = await model.createContext({contextSize: T});
  try {
    const out = await context.getSequence().controlledEvaluate(ids.map((id) => [id, {generateNext: {probabilities: true}}]));
    return out.map((o) => o.next.probabilities);
  } finally {
    await context.dispose();
  }
}

function argmax(probabilities) {
  let best = -1, bestP = -1;
  for (const [id, p] of probabilities) if (p > bestP) [best, bestP] = [id, p];
  return best;
}

// Greedy decoding by llama.cpp's probabilities, one token at a time through the sequence's cache (its
// sampler's evaluate() stops at the end-of-text token, which lmtrain's sampler treats as a newline).
async function greedy(ids, n) {
  const context = await model.createContext({contextSize: T});
  try {
    const sequence = context.getSequence(), got = [];
    for (let input = ids; got.length < n; input = [got[got.length - 1]]) {
      const last = input.length - 1;
      const out = await sequence.controlledEvaluate(input.map((id, i) => (i === last ? [id, {generateNext: {probabilities: true}}] : id)));
      got.push(argmax(out[last].next.probabilities));
    }
    return got;
  } finally {
    await context.dispose();
  }
}

let promptIds = null;
if (args.probs) {
  const rows = JSON.parse(fs.readFileSync(args.probs, "utf8"));
  const ids = rows.map((r) => r.context_id);
  promptIds = [...ids, rows[rows.length - 1].next_id];
  const probs = await nextTokenProbabilities(ids);
  const tol = Number(args.tolerance);
  let worst = 0, agree = 0, tiesAside = 0;
  rows.forEach((r, i) => {
    for (const t of r.top) worst = Math.max(worst, Math.abs((probs[i].get(t.id) ?? 0) - t.prob));
    if (argmax(probs[i]) === r.top[0].id) agree++;
    else if (r.top.length > 1 && r.top[0].prob - r.top[1].prob <= 2 * tol) tiesAside++;  // within the tolerance: a tie
  });
  console.log(`probs: ${rows.length} positions, max |p_llama.cpp - p_lmtrain| = ${worst.toExponential(2)} over each ` +
              `position's top ${rows[0].top.length}; argmax agrees at ${agree}/${rows.length}` +
              (tiesAside ? ` (${tiesAside} more are ties within 2 x tolerance)` : ""));
  if (worst > tol) fail(`probabilities differ by ${worst.toExponential(2)} > tolerance ${tol}`);
  if (agree + tiesAside < rows.length) fail("argmax disagrees where lmtrain's top two are further apart than the tolerance");
}
if (args.text !== undefined) {
  if (!promptIds) fail("--text needs --probs (the ids to compare with)");
  const got = Array.from(model.tokenize(args.text));
  const want = (promptIds ?? []).slice(1);  // lmtrain's ids start with </s>, llama.cpp's bos
  if (got.join(" ") === want.join(" ")) console.log(`tokenize: llama.cpp's ${got.length} ids = lmtrain's`);
  else fail(`tokenize: llama.cpp ${got.join(" ")} vs lmtrain ${want.join(" ")}`);
}
if (args.greedy) {
  if (!promptIds) fail("--greedy needs --probs (the prompt's ids)");
  const got = await greedy(promptIds ?? [], Number(args.greedy));
  const want = (args.expect ?? "").trim().split(/\s+/).filter((s) => s.length).map(Number);
  const at = got.findIndex((id, i) => id !== want[i]);
  if (at < 0 && got.length === want.length) console.log(`greedy: llama.cpp's ${got.length} tokens = lmtrain's`);
  else fail(`greedy: first difference at token ${at}: llama.cpp ${got.join(" ")} vs lmtrain ${want.join(" ")}`);
}
if (args.loss) {
  const raw = fs.readFileSync(args.loss);
  if (raw.subarray(0, 8).toString("latin1") !== "LMTOKENS") fail(`${args.loss} is not an lmtrain token file`);
  const width = raw.readUInt32LE(12), count = Number(raw.readBigUInt64LE(16));
  const id = (k) => (width === 2 ? raw.readUInt16LE(256 + 2 * k) : raw.readUInt32LE(256 + 4 * k));
  const total = Math.floor((count - 1) / T), n = Math.min(Number(args.windows ?? total), total);
  let sum = 0;
  for (let w = 0; w < n; ++w) {
    const start = Math.floor(w * total / n) * T;  // evenly spread, as lmtrain's evaluate
    const x = Array.from({length: T}, (_, k) => id(start + k));
    const probs = await nextTokenProbabilities(x);
    let nll = 0;
    for (let k = 0; k < T; ++k) nll -= Math.log(probs[k].get(id(start + k + 1)) ?? 0);
    sum += nll / T;
  }
  console.log(`loss: ${(sum / n).toFixed(4)} nats/token over ${n} of ${total} windows of ${T} tokens (llama.cpp)`);
}
await model.dispose();
await llama.dispose();
console.log(failed ? "check_gguf: FAILED" : "check_gguf: ok");
process.exit(failed ? 1 : 0);
