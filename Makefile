# Thin wrapper around CMake. `make` builds the release tool; `make check` builds release and ASan+UBSan builds and
# runs every test in both; `make demo` runs the main job (decide, as a table, with the trained demo model).
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc)

.PHONY: all build asan fuzz check test demo clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTD_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# libFuzzer targets (clang): the JSONL row and predictions readers, the tokenizer loader and the server's request
# parser, each run for TD_FUZZ_SECONDS (default 15) on a copy of its seed corpus in tests/fuzz/corpus/.
fuzz:
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DTD_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	cd $(FUZZ_BUILD) && ctest --output-on-failure -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

check: build asan
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(ASAN_BUILD) && TD_SANITIZED=1 ctest --output-on-failure -j $(JOBS)
	$(MAKE) fuzz

demo: build
	./$(BUILD)/typedecide decide --table --quiet --model models/demo-qwen3 --evidence models/demo/ticket.txt \
		--criteria models/demo/criteria.jsonl

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
