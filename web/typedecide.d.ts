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
    /** the threads the pass ran with (1 in the one-thread module) */
    threads: number;
    /** jobs the context's pool handed to its worker threads: 0 unless threads really ran */
    pool_jobs: number;
}

/** The wasm32 ceiling of the module's memory: 4 GiB. */
export declare const MAX_MEMORY: number;

/** What load() accepts: a URL (in Node also a file path), a File or Blob, or the bytes. */
export type ModelSource = string | URL | Blob | ArrayBuffer | Uint8Array;
export interface LoadOptions {
    /** Called after every chunk; total is null when the server does not say (then the buffer grows: one copy). */
    onProgress?: (p: { loaded: number; total: number | null }) => void;
    /** The name in messages and info.name (default: the file's name). */
    name?: string;
    kernels?: 'wasm128r' | 'wasm128' | 'scalar';
}

/** One streamed token; a final piece of text held back (a stop string that did not match) comes with token -1. */
export interface TokenEvent { token: number; text: string; index: number; }

export interface GenerateOptions {
    /** The prompt text (added tokens such as <|im_start|> recognised), or promptIds. */
    prompt?: string;
    promptIds?: number[];
    /** Default 256 (cut to what the context leaves). */
    maxTokens?: number;
    /** The model's sampling defaults (generation_config.json; greedy without one) unless given: 0 = greedy. */
    temperature?: number;
    seed?: number;
    ignoreEos?: boolean;
    onToken?: (t: TokenEvent) => void;
    /** Aborting it cancels: the promise resolves with finish "cancelled" and the text so far. */
    signal?: AbortSignal;
}

export interface GenerateResult {
    ids: number[];
    text: string;
    finish: 'stop' | 'length' | 'cancelled';
    /** Prompt tokens, and those whose KV was found cached (not read again). */
    nPrompt: number;
    nReused: number;
    /** From the request to the first token (ms), reading the prompt, first to last token. */
    msFirstToken: number;
    msPrefill: number;
    msDecode: number;
}

export interface ChatOptions {
    system?: string;
    /** Thinking on (default, as `typedecide chat`) or off (enable_thinking false). */
    think?: boolean;
    maxTokens?: number;
    temperature?: number;
    seed?: number;
    /** Room kept for an answer when old turns must be dropped (default 256, at most maxTokens). */
    minReply?: number;
}

export interface ChatReply extends GenerateResult {
    /** Messages dropped from the start of the conversation (the system message stays) to fit the context. */
    dropped: number;
}

export interface ModelInfo {
    arch: string;
    kernels: string;
    n_vocab: number;
    n_ctx_train: number;
    hybrid: boolean;
    chat_family: 'qwen3' | 'qwen3.5' | null;
    can_generate: boolean;
    name: string;
}

export declare class ChatSession {
    readonly model: Model;
    /** The conversation so far ({role, content}); the system message first when there is one. */
    messages: { role: 'system' | 'user' | 'assistant'; content: string }[];
    /** Streams the answer; its KV from the earlier turns is reused (only the new turn is read). Old turns are
     *  dropped when the conversation leaves less than minReply tokens of the context (reply.dropped). */
    send(text: string, options?: { onToken?: (t: TokenEvent) => void; signal?: AbortSignal; maxTokens?: number;
                                   temperature?: number; seed?: number }): Promise<ChatReply>;
    /** The ids the next turn would send (the template's assistant opening last). */
    tokenize(): number[];
    cancel(): void;
    /** A new conversation (the system message stays). */
    reset(): void;
}

/** Whether this context can run the threaded module (SharedArrayBuffer: Node, or a cross-origin isolated page). */
export declare function canThread(): boolean;

export declare class Typedecide {
    /** Loads the module (typedecide.js + typedecide.wasm from `base`, default dist/ beside typedecide.mjs). */
    static create(options?: { base?: string | URL; threads?: number }): Promise<Typedecide>;
    /** threads (create's option, default the machine's cores, at most 16) > 1 where canThread(): the threaded module
     *  (typedecide-mt.{js,wasm,worker.js}: the engine's thread pool on threads - 1 Web Workers over shared memory);
     *  else the one-thread module (typedecide.{js,wasm}). The same bits either way. */
    readonly threaded: boolean;
    /** The most threads the engine uses here (1 in the one-thread module): decide, generate and bench's default. */
    readonly threads: number;
    /** The C library's version string. */
    version(): string;
    /** TD_KERNELS for the models loaded next: "wasm128" (default, SIMD128) or "scalar" (the reference). */
    setKernels(name: 'wasm128r' | 'wasm128' | 'scalar'): void;
    /** Writes a file into the module's virtual file system (its folders are made). */
    addFile(path: string, bytes: ArrayBuffer | Uint8Array): void;
    addFileFromUrl(path: string, url: string | URL): Promise<void>;
    /** Streams a GGUF model into the module's memory (one copy: the model owns the buffer) with progress; refused
     *  before anything is read when its size (Content-Length, File.size) cannot fit under the 4 GiB ceiling, and
     *  when the browser refuses to grow the memory. The model becomes the current one (generate, chat). */
    load(source: ModelSource, options?: LoadOptions): Promise<Model>;
    /** The module's memory now, in bytes (it only grows). */
    memoryBytes(): number;
    /** The current model's (the last load()ed). */
    generate(options: GenerateOptions): Promise<GenerateResult>;
    chat(options?: ChatOptions): ChatSession;
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
    readonly info: ModelInfo;
    /** Streams a continuation (the library's td_gen; the prompt's KV stays cached for the next call). */
    generate(options: GenerateOptions): Promise<GenerateResult>;
    chat(options?: ChatOptions): ChatSession;
    /** The generator generate and chat share: nCtx KV rows (default min(4096, n_ctx_train)), maxSequences slots
     *  (default 8), threads. Drops what is cached. */
    configureGeneration(options?: { nCtx?: number; maxSequences?: number; threads?: number }): void;
    /** Cancels the generation running now. */
    cancel(): void;
    /** One-shot, synchronous, a fresh context: continues the prompt with the model's sampling defaults. */
    generate(prompt: string, options?: { maxTokens?: number; temperature?: number; seed?: number; ignoreEos?: boolean;
                                         threads?: number }):
        { prompt_ids: number[]; ids: number[]; text: string; finish: string };
    bench(nPrefill: number, nDecode: number, options?: { threads?: number }): BenchResult;
    free(): void;
}

/** The same API with the engine in a Web Worker (typedecide_worker.mjs): the page never freezes. */
export declare class TypedecideWorker {
    /** url: the Worker script (default typedecide_worker.mjs beside the module); base: where typedecide.js and
     *  .wasm are (default dist/). */
    constructor(options?: { url?: string | URL; base?: string | URL; threads?: number });
    load(source: ModelSource, options?: LoadOptions): Promise<WorkerModel>;
    memoryBytes(): Promise<number>;
    terminate(): void;
}
export declare class WorkerModel {
    generate(options: GenerateOptions): Promise<GenerateResult>;
    chat(options?: ChatOptions): WorkerChat;
    decide(evidence: string, criteria: Criterion[] | string, options?: { mode?: DecideModeName; threads?: number }):
        Promise<Decision[]>;
    tokenize(text: string): Promise<number[]>;
    cancel(): Promise<boolean>;
    free(): Promise<boolean>;
}
export declare class WorkerChat {
    send(text: string, options?: { onToken?: (t: TokenEvent) => void; signal?: AbortSignal; maxTokens?: number;
                                   temperature?: number; seed?: number }): Promise<ChatReply>;
    reset(): Promise<boolean>;
    cancel(): Promise<boolean>;
}
