// llama.cpp (the prebuilt CPU build of node-llama-cpp) as a reference: loads a GGUF, tokenizes a text with the
// GGUF's own tokenizer metadata, and continues a prompt of token ids greedily.
//   node llama_greedy.mjs MODEL.gguf IDS N [TEXT]  ->  {"greedy": [...], "tokens": [...] (of TEXT, when given)}
import {getLlama} from "node-llama-cpp";

const [modelPath, idsArg, nArg, text] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: 512, threads: 2});
const sequence = context.getSequence();
const greedy = [];
for await (const token of sequence.evaluate(idsArg.split(",").map(Number), {temperature: 0})) {
    greedy.push(token);
    if (greedy.length >= Number(nArg)) break;
}
const out = {greedy};
if (text !== undefined) out.tokens = Array.from(model.tokenize(text, false));
console.log(JSON.stringify(out));
await context.dispose();
await model.dispose();
await llama.dispose();
