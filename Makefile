PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install test demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

test: $(STAMP)
	$(VENV)/bin/python -m pytest tests -q -x -p no:cacheprovider $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/python examples/tour.py

bench: $(STAMP)
	$(VENV)/bin/python bench/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
