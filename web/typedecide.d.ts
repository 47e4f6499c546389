// Types of web/typedecide.mjs: typedecide's C engine as WebAssembly, for the browser (page or Worker) and Node.

/** One criterion: a question and its options (rendered "A. description", "B. ..."); a row may carry its own evidence. */
export interface Criterion {
    id: string | number;
    question: string;
    options: { id: string | number; description: string }[];
    evidence?: string;
}

/** One decision, as `typedecide decide` prints it: probabilities in option order. */
export interface Decision {
    id: string;
    answer: string;
    letter: string;
    options: string[];
    probs: number[];
    logits?: number[];
    suffix_tokens: number;
}

export type DecideModeName = 'batch' | 'serial' | 'fresh';
export declare const DecideMode: Readonly<{ batch: 0; serial: 1; fresh: 2 }>;

export interface BenchResult {
    prefill_tokens: number;
    prefill_ms: number;
    decode_tokens: number;
    decode_ms: number;
    kernels: string;
}

export declare class Typedecide {
    /** Loads the module (typedecide.js + typedecide.wasm from `base`, default dist/ beside typedecide.mjs). */
    static create(options?: { base?: string | URL }): Promise<Typedecide>;
    /** The C library's version string. */
    version(): string;
    /** TD_KERNELS for the models loaded next: "wasm128" (default, SIMD128) or "scalar" (the reference). */
    setKernels(name: 'wasm128' | 'scalar'): void;
    /** Writes a file into the module's virtual file system (its folders are made). */
    addFile(path: string, bytes: ArrayBuffer | Uint8Array): void;
    addFileFromUrl(path: string, url: string | URL): Promise<void>;
    /** A Hugging Face directory (config.json, *.safetensors, tokenizer.json, ...) or a GGUF file, by its path. */
    loadModel(path: string): Model;
    /** A tokenizer.json, or a GGUF file's tokenizer. */
    loadTokenizer(path: string): Tokenizer;
}

export declare class Tokenizer {
    tokenize(text: string, options?: { parseSpecial?: boolean }): number[];
    free(): void;
}

export declare class Model {
    readonly arch: string;
    readonly kernels: string;
    tokenizer(): Tokenizer;
    decide(evidence: string, criteria: Criterion[] | string,
           options?: { mode?: DecideModeName; threads?: number }): Decision[];
    decideJsonl(evidence: string, criteriaJsonl: string, options?: { mode?: DecideModeName; threads?: number }): string;
    /** Continues the prompt with the model's sampling defaults (temperature 0: greedy; seed: the sampler's). */
    generate(prompt: string, options?: { maxTokens?: number; temperature?: number; seed?: number; ignoreEos?: boolean }):
        { prompt_ids: number[]; ids: number[]; text: string; finish: string };
    bench(nPrefill: number, nDecode: number, options?: { threads?: number }): BenchResult;
    free(): void;
}
