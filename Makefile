PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

PEERS := bench/.venv-peers
PEERS_STAMP := $(PEERS)/.installed
BENCH_ARGS ?=
DEMO_ARGS ?=

.PHONY: install test test-slow test-peers demo demo-mpi tour docs dist bench peers clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

# The quick suite; `make test-slow` runs the long variants (marked `slow`).
test: $(STAMP)
	$(VENV)/bin/python -m pytest tests -q -x -p no:cacheprovider -m "not slow" $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(VENV)/bin/python -m pytest tests -q -x -p no:cacheprovider -m slow $(PYTEST_ARGS)

# Trains the ResMLP of examples/resmlp.py on the bundled digits; writes runs/resmlp/.
demo: $(STAMP)
	$(VENV)/bin/python examples/resmlp.py $(DEMO_ARGS)

# The same training, data parallel on MPI_RANKS processes (the `mpi` extra, in `dev`).
MPI_RANKS ?= 2
demo-mpi: $(STAMP)
	$(VENV)/bin/mpiexec -n $(MPI_RANKS) $(VENV)/bin/python examples/resmlp.py --distributed $(DEMO_ARGS)

tour: $(STAMP)
	$(VENV)/bin/python examples/tour.py

# The documentation site in build/docs/html (Sphinx; the `docs` extra, part of `dev`).
# Warnings are errors, broken references included (nitpicky: see docs/conf.py);
# tests/test_docs.py runs the pages' examples in `make test`.
docs: $(STAMP)
	$(VENV)/bin/python -m sphinx -b html -W --keep-going -q docs build/docs/html
	@echo "docs: build/docs/html/index.html"

# A wheel and an sdist in dist/, built with `build` in a throwaway venv; each is
# installed into a fresh venv (no extras) that runs tests/install_smoke.py.
DIST_CHECK := build/dist-check

dist:
	rm -rf dist $(DIST_CHECK)
	$(PY) -m venv $(DIST_CHECK)/build
	$(DIST_CHECK)/build/bin/pip install -q build
	$(DIST_CHECK)/build/bin/python -m build --outdir dist .
	for f in LICENSE README.md CHANGELOG.md; do \
	  tar tzf dist/fgrad-*.tar.gz | grep -qx "fgrad-[^/]*/$$f" || { echo "sdist lacks $$f"; exit 1; }; \
	done
	! tar tzf dist/fgrad-*.tar.gz | grep -E '__pycache__|\.py[cod]$$|venv|\.hypothesis|bench/|runs/'
	for kind in whl tar.gz; do \
	  $(PY) -m venv $(DIST_CHECK)/$$kind && \
	  $(DIST_CHECK)/$$kind/bin/pip install -q dist/*.$$kind && \
	  (cd $(DIST_CHECK) && $$kind/bin/python -I $(CURDIR)/tests/install_smoke.py \
	    $(CURDIR)/README.md $(CURDIR)/examples/tour.py) || exit 1; \
	done

# The benchmarks run in their own environment holding fgrad and its peers
# (PyTorch, JAX, autograd, Optax) so that all are timed in one process.
peers: $(PEERS_STAMP)

$(PEERS_STAMP): pyproject.toml bench/requirements-peers.txt
	test -x $(PEERS)/bin/python || $(PY) -m venv $(PEERS)
	$(PEERS)/bin/pip install -q --upgrade pip
	$(PEERS)/bin/pip install -q -r bench/requirements-peers.txt -e .
	touch $@

bench: $(PEERS_STAMP)
	$(PEERS)/bin/python bench/run.py $(BENCH_ARGS)

# The tests that compare against PyTorch, Optax and JAX themselves (skipped by
# `make test`, whose environment has none of them), in the peers' environment.
PEER_TESTS := tests/test_nn_torch_crosscheck.py tests/test_optim_losses_peers.py \
	tests/test_torch_names_layers.py tests/test_torch_state_dict.py tests/test_nn_conv.py \
	tests/test_nn_recurrent.py tests/test_nn_init.py tests/test_optim_catalogue.py \
	tests/test_optim_blocks.py tests/test_dlpack.py

test-peers: $(PEERS_STAMP)
	$(PEERS)/bin/python -m pytest -q $(PEER_TESTS) $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(PEERS) build dist *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
