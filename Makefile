# Two entry points (see README): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Portable llama.cpp build: a native build can segfault on CPUs with AVX-512/AMX paths.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
	-DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_BF16=OFF
PIP := CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --disable-pip-version-check

.PHONY: demo install install-test test lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(PIP) -e ".[all]"
	$(PIP) --no-deps --require-hashes -r requirements-encoder.txt

demo: install
	$(BIN)/knockout demo
	@echo
	@echo "knockout is installed in $(VENV); to use the knockout command, activate it first:"
	@echo "    source $(VENV)/bin/activate"

install-test: $(BIN)/python
	$(PIP) -e ".[test]"
	$(PIP) --no-deps --require-hashes -r requirements-encoder.txt
	scripts/install-browser.sh

# quiet: one line per test file (tests/progress_lines.py), failures in full, the 15 slowest tests at the end
test: install-test
	$(BIN)/python -m pytest -q -ra --durations=15 -o console_output_style=classic -p tests.progress_lines

lint:
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m mypy
