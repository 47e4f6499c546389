// llama.cpp (node-llama-cpp's prebuilt CPU build) tokenizing every line of a JSONL file ({"text": ...}) with a
// GGUF's own tokenizer metadata, no BOS, special-token text not parsed:
//   node llama_tokenize.mjs MODEL.gguf LINES.jsonl  ->  one JSON array of ids per line
import {getLlama} from "node-llama-cpp";
import fs from "node:fs";

const [modelPath, linesPath] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath, vocabOnly: true});
const out = [];
for (const line of fs.readFileSync(linesPath, "utf8").split("\n")) {
    if (line === "") continue;
    out.push(JSON.stringify(Array.from(model.tokenize(JSON.parse(line).text, false))));
}
process.stdout.write(out.join("\n") + "\n");
await model.dispose();
await llama.dispose();
