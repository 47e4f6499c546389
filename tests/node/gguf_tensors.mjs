// node-llama-cpp's own GGUF reader as a reference for what a file stores: each tensor's name, ggml type, shape
// and absolute byte offset in the file.
//   node gguf_tensors.mjs FILE.gguf  ->  {"tensors": [{"name", "type", "shape", "offset"}...]}
import {readGgufFileInfo} from "node-llama-cpp";

const info = await readGgufFileInfo(process.argv[2], {sourceType: "filesystem", logWarnings: false,
                                                       ignoreKeys: ["tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type"]});
const tensors = info.fullTensorInfo.map(t => ({name: t.name, type: t.ggmlType, shape: t.dimensions.map(Number),
                                               offset: Number(t.fileOffset)}));
console.log(JSON.stringify({tensors}));
