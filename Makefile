# Thin wrapper around CMake. `make` builds the release tool; `make check` builds release and ASan+UBSan builds, runs
# every test in both, the fuzzers, and compiles the CUDA backend (`make cuda`); `make demo` runs the main job;
# `make install PREFIX=/usr/local` installs the tool, the libraries, the header, pkg-config and CMake files.
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
CUDA_BUILD ?= build-cuda
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local

.PHONY: all build asan fuzz cuda wasm check test demo install clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# DESTDIR stages the files (packaging); ldconfig then makes a system prefix's new soname known to the loader.
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix $(PREFIX)
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTD_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# libFuzzer targets (clang): the JSONL row and predictions readers, the tokenizer loader and the server's request
# parser, each run for TD_FUZZ_SECONDS (default 15) on a copy of its seed corpus in tests/fuzz/corpus/.
fuzz:
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DTD_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	cd $(FUZZ_BUILD) && ctest --output-on-failure -j $(JOBS)

# The CUDA backend (-DTD_CUDA=ON: sm_90a code, compute_90 PTX) compiled with this machine's nvcc, every .cu and the
# device tests; they run where a GPU answers nvidia-smi, and are only compiled elsewhere (bench/cuda_device.sh runs
# them on the H200).
cuda:
	cmake -S . -B $(CUDA_BUILD) -DCMAKE_BUILD_TYPE=Release -DTD_CUDA=ON >/dev/null
	cmake --build $(CUDA_BUILD) -j $(JOBS)
	@if nvidia-smi -L >/dev/null 2>&1; then cd $(CUDA_BUILD) && ctest --output-on-failure -R cuda; \
	else echo "make cuda: no GPU here; the CUDA backend and its tests compiled, not run"; fi

# The WebAssembly module (web/build.sh: Debian's emscripten, the core's libraries from Debian's source packages):
# web/dist/typedecide.{js,wasm} (one thread) and typedecide-mt.{js,wasm,worker.js} (Web Workers over shared memory);
# test_wasm, test_wasm_threads, test_wasm_browser, test_wasm_js and test_wasm_page check them under Node and in
# headless Chromium. Skipped where emscripten is not installed or Debian's source packages cannot be fetched (the
# wasm tests then skip too).
wasm:
	@if ! command -v emcc >/dev/null; then echo "make wasm: emscripten not installed, skipped"; \
	elif ! web/fetch_deps.sh; then echo "make wasm: Debian's source packages unreachable, skipped"; \
	else web/build.sh; fi

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite runs last, so that its ctest summary is the last thing check prints.
check: build asan
	$(MAKE) cuda
	$(MAKE) wasm
	$(MAKE) fuzz
	cd $(ASAN_BUILD) && TD_SANITIZED=1 ctest --output-on-failure -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	./$(BUILD)/typedecide decide --table --quiet --model models/demo-qwen3 --evidence models/demo/ticket.txt \
		--criteria models/demo/criteria.jsonl

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(CUDA_BUILD)
