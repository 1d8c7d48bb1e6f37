# The two commands of the README: `make lab` opens the course, `make test` runs every test.
# Both create .venv/ inside the repository and install the pinned requirements on first use.
SHELL := /bin/bash
# CPython 3.11 to 3.14 (3.11.2 and later; also in pyproject.toml's requires-python). Without
# PYTHON=, the first of these commands that runs a supported version is used.
PYTHON_MIN := 3.11.2
PYTHON_MAX := 3.14
PYTHON_CANDIDATES := python3.11 python3.12 python3.13 python3.14 python3 python
PYTHON_OK := import sys; v = sys.version_info; sys.exit(not ((3, 11, 2) <= v[:3] and v[:2] <= (3, 14)))
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for p in $(PYTHON_CANDIDATES); do \
	"$$p" -c '$(PYTHON_OK)' >/dev/null 2>&1 && { command -v "$$p"; break; }; done)
endif
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest workers for `make test` (override: make test JOBS=1)
JOBS ?= 2

.PHONY: lab student restore test test-cpu-path test-fast test-resolve bench bench-norms execute flashcards export audit-graders \
	slides slide-fit test-exports test-browser check-python clean help

help:
	@echo "make lab      open the course in JupyterLab (first run installs .venv/)"
	@echo "make lab LANG=zh  the same in one language (LANG=en or LANG=zh)"
	@echo "make student  the student edition: outputs cleared, solutions removed, answers folded (build/student/)"
	@echo "make restore LESSON=1  put back a lesson JupyterLab saved over (EDITION=zh|en for the copies)"
	@echo "  (a lesson is named 1, 01 or 01_batch_norm wherever LESSON= or LESSONS= is taken)"
	@echo "make test     run every test: helpers unit tests + strict nbval over all notebooks"
	@echo "make test-cpu-path  strict nbval over every lesson on torch's scalar CPU code path, one thread (CPU_PATH=avx2 for AVX2, CPU_THREADS= for all cores)"
	@echo "make audit-graders  run every checker and drill on the bank of wrong and right solutions (tests/grader_bank)"
	@echo "make bench    execute each notebook and print its wall time"
	@echo "make execute  re-execute every notebook in place (after changing helpers/)"
	@echo "make bench-norms  time the normalisation kernels against a copy (CPU, and GPU if present)"
	@echo "make flashcards  write every lesson's interview questions as Anki CSV (build/flashcards/)"
	@echo "make export  single-language notebooks (build/en, build/zh) and the HTML edition (build/html)"
	@echo "make slides  reveal.js lecture slides per language (build/slides), offline"
	@echo "make test-exports  check the single-language notebooks against the bilingual ones, cell by cell"
	@echo "make test-browser  JupyterLab, RISE, the HTML edition and the slides in headless Chromium"
	@echo "make slide-fit  does every slide of every deck fit a 1280x720 and a 1920x1080 window? (after make slides)"
	@echo "make test-resolve  resolve requirements.txt for Python 3.11.2 to 3.14, Linux, macOS, Windows (network)"

PYTHON_HELP := the course runs on CPython 3.11 ($(PYTHON_MIN) or later), 3.12, 3.13 and \
	$(PYTHON_MAX); install one and run, for example: make lab PYTHON=/path/to/python3.13

check-python:
	@[ -n "$(PYTHON)" ] || { echo "No supported Python found ($(PYTHON_CANDIDATES)): $(PYTHON_HELP)" >&2; exit 1; }
	@"$(PYTHON)" -c '$(PYTHON_OK)' 2>/dev/null || { echo "$(PYTHON) is Python $$("$(PYTHON)" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo '(not runnable)'): $(PYTHON_HELP)" >&2; exit 1; }
	@echo "Python: $(PYTHON) ($$("$(PYTHON)" -c 'import platform; print(platform.python_version())'))"

# The README's commands without make, in the same order (tests/test_install.py checks it):
# a venv, the pinned requirements, then the course itself as an editable install so that
# `import helpers` works from any folder and in every kernel of this venv. TORCH_INDEX= (for
# example https://download.pytorch.org/whl/cpu) first installs torch from that index.
TORCH_PIN := $(shell grep -m1 '^torch==' requirements.txt)
# pip itself first, at its pin: the pip a venv starts with (23.0.1 with Debian 12's Python)
# installs the requirements more slowly (pip 23.2.1: 91 s, the pinned 26.3: 73 s, on 2 cores)
PIP_PIN := $(shell grep -m1 '^pip==' requirements.txt)
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check --no-input
$(STAMP): requirements.txt constraints-cuda.txt pyproject.toml | check-python
	"$(PYTHON)" -m venv $(VENV)
	$(PIP_INSTALL) $(PIP_PIN)
	$(if $(TORCH_INDEX),$(PIP_INSTALL) $(TORCH_PIN) --index-url $(TORCH_INDEX))
	$(PIP_INSTALL) -r requirements.txt
	$(PIP_INSTALL) -e .
	$(PY) -m tools.lab_setup
	touch $(STAMP)

# (--allow-root only when run as root, as in containers: JupyterLab refuses root otherwise)
LAB_FLAGS := $(if $(filter 0,$(shell id -u)),--allow-root,)

# make lab: the bilingual lessons (notebooks/). make lab LANG=zh (or LANG=en): that language's
# copies in build/zh (build/en), made from the lessons without Node.js; a copy you have changed
# is kept (make restore LESSON=NN EDITION=zh puts the course's back). LANG counts only on the
# command line: the shell's locale variable of the same name is ignored.
LAB_LANG := $(if $(filter command line,$(origin LANG)),$(LANG),)
ifneq ($(filter-out en zh,$(LAB_LANG)),)
$(error LANG=$(LAB_LANG): the course has the editions LANG=en and LANG=zh, or both languages without LANG)
endif
LAB_START := $(if $(LAB_LANG),build/$(LAB_LANG),notebooks)/00_introduction.ipynb

lab: $(STAMP)
	$(if $(LAB_LANG),$(PY) -m tools.export notebooks --lang $(LAB_LANG) --keep-edited)
	$(PY) -m tools.lab_setup
	$(VENV)/bin/jupyter lab --notebook-dir=. $(LAB_FLAGS) $(LAB_START)

# the student edition (build/student/{en,zh,bilingual}): outputs cleared, model solutions
# removed, answers folded away until clicked
student: $(STAMP)
	$(PY) -m tools.student $(if $(LESSONS),--lessons $(LESSONS),)

# put back a lesson JupyterLab has saved over (your version goes to build/backup/)
EDITION ?= bilingual
restore: $(STAMP)
	@[ -n "$(LESSON)" ] || { echo "name the lesson: make restore LESSON=1 (or 01, or 01_batch_norm; EDITION=zh for build/zh; LESSON=all for every lesson)" >&2; exit 1; }
	$(PY) -m tools.restore $(if $(filter all,$(LESSON)),--all,$(LESSON)) --edition $(EDITION)

# The lessons in the order pytest-xdist should hand them out: the longest first (make bench),
# then every other lesson, then the unit tests, so that no long lesson is left to run alone on
# one worker at the end. --no-loadscope-reorder keeps that order (by default xdist sorts the
# modules by their number of tests, which puts the lessons with few, slow cells last).
LONGEST_LESSONS := 11_weight_normalization 09_norms_in_todays_transformers 10_batch_norm_in_practice \
	01_batch_norm 05_pre_and_post_ln 06_deep_norm 07_cost_of_normalization 08_sync_batch_norm \
	00_introduction
ALL_LESSONS := $(shell find notebooks -name '*.ipynb' -not -path '*/.*' | sort)
LONGEST_FILES := $(filter $(foreach n,$(LONGEST_LESSONS),notebooks/$(n).ipynb),$(ALL_LESSONS))
ORDERED_LESSONS := $(foreach n,$(LONGEST_LESSONS),$(filter notebooks/$(n).ipynb,$(ALL_LESSONS))) \
	$(filter-out $(LONGEST_FILES),$(ALL_LESSONS))
XDIST := -n $(JOBS) --dist loadscope --no-loadscope-reorder

# torch's threads per process in `make test` (OMP_NUM_THREADS): the JOBS pytest workers, each
# running a lesson's kernel or the unit tests, share the cores, so each gets cores / JOBS (at
# least 1) rather than torch's default of one per core, which oversubscribes them (on 2 cores,
# the lessons' strict nbval: 327 CPU-seconds in 171 s with one thread each, 420 in 217 s with
# torch's default). An OMP_NUM_THREADS already set is kept; TEST_THREADS= for torch's default.
CORES := $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
TEST_THREADS ?= $(or $(OMP_NUM_THREADS),$(patsubst 0,1,$(shell expr $(CORES) / $(JOBS) 2>/dev/null)))

test: $(STAMP)
	$(if $(TEST_THREADS),OMP_NUM_THREADS=$(TEST_THREADS)) $(PY) -m pytest $(XDIST) --nbval --nbval-current-env \
		--nbval-sanitize-with nbval_sanitize.cfg $(ORDERED_LESSONS) tests

# strict nbval over every lesson with torch's CPU kernels forced onto another code path
# (default: the scalar one; CPU_PATH=avx2 for AVX2) and one thread per kernel (CPU_THREADS=N
# for N, CPU_THREADS= for torch's default, one per core, as `make execute` runs to write the
# outputs that are compared): the outputs must depend on neither the CPU's instruction set nor
# its number of cores. One thread also leaves more of the machine to the jobs that CI runs
# beside this one (this target alone, on 2 cores: 363 CPU-seconds with one thread per kernel,
# 417 with torch's default of two).
CPU_PATH ?= default
CPU_THREADS ?= 1
test-cpu-path: $(STAMP)
	ATEN_CPU_CAPABILITY=$(CPU_PATH) $(if $(CPU_THREADS),OMP_NUM_THREADS=$(CPU_THREADS)) $(PY) -m pytest $(XDIST) --nbval \
		--nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg $(ORDERED_LESSONS)

# every checker and drill on tests/grader_bank: wrong rejected, right diagnosis, right accepted
# (fails below 100 % rejected or accepted; tests/test_grader_audit.py runs it in make test)
audit-graders: $(STAMP)
	$(PY) -m tools.grader_audit

test-fast: $(STAMP)
	$(PY) -m pytest -n $(JOBS) tests

# resolve requirements.txt for every supported Python and platform without installing it
# (needs the package index; uv reads only the wheels' metadata)
RESOLVE_STAMP := $(VENV)/.installed-resolve
$(RESOLVE_STAMP): requirements-resolve.txt $(STAMP)
	$(PIP_INSTALL) -r requirements-resolve.txt
	touch $(RESOLVE_STAMP)

# The resolution needs no conftest.py (tests/conftest.py imports torch; the root one installs
# nbval's kernel start, which imports nbformat) and neither the nbval nor the Hypothesis plugin:
# without them each of the five pytest processes starts in about 0.8 CPU-s instead of 6.7 (the
# eight tests skipped: 3.8 CPU-s against 33.4 on 2 cores).
test-resolve: $(RESOLVE_STAMP)
	COURSE_TEST_RESOLVE=1 $(PY) -m pytest -n 4 -v --noconftest -p no:nbval -p no:hypothesispytest \
		tests/test_install.py -k resolve

bench: $(STAMP)
	$(PY) -m tools.bench $(LESSONS)

# the table of lesson 07 (THREADS, REPEATS: make bench-norms THREADS=2 REPEATS=31)
THREADS ?= 1
REPEATS ?= 21
bench-norms: $(STAMP)
	$(PY) -m helpers.bench_norms --threads $(THREADS) --repeats $(REPEATS)

execute: $(STAMP)
	$(PY) -m tools.bench --execute-in-place $(LESSONS)

flashcards: $(STAMP)
	$(PY) -m tools.flashcards

# single-language editions (LESSONS="1 05" for some lessons only: a lesson is named 1, 01 or
# 01_batch_norm, tools/course.py's resolve_lesson); the first run installs
# MathJax and reveal.js from npm into build/vendor/ (needs Node.js and npm)
LESSONS ?=
EXPORT_ARGS := $(if $(LESSONS),--lessons $(LESSONS),)
export: $(STAMP)
	$(PY) -m tools.export notebooks html $(EXPORT_ARGS)

slides: $(STAMP)
	$(PY) -m tools.export slides $(EXPORT_ARGS)

# the editions keep the bilingual notebooks' code cells and outputs exactly (checked cell by
# cell), so the strict nbval run of `make test` covers them without executing them again.
# EXPORTED=1: the editions are already built (by make export), check them without building
# them again (CI)
test-exports: $(if $(EXPORTED),$(STAMP),export)
	$(PY) -m pytest -q -p no:cacheprovider tests/test_editions.py

# headless Debian Chromium (CHROMIUM=/path to use another), driven by Playwright's Python package
BROWSER_STAMP := $(VENV)/.installed-browser
$(BROWSER_STAMP): requirements-browser.txt $(STAMP)
	$(PY) -m pip install --disable-pip-version-check --no-input -r requirements-browser.txt
	touch $(BROWSER_STAMP)

# EXPORTED=1: the HTML edition and the slides are already built (make export slides), test
# those instead of building them again (CI)
test-browser: $(BROWSER_STAMP)
	$(if $(EXPORTED),,$(PY) -m tools.export notebooks --lessons $(or $(BROWSER_LESSON),03_instance_and_group_norm))
	$(if $(EXPORTED),,$(PY) -m tools.export html slides)
	BROWSER_LESSON=$(or $(BROWSER_LESSON),03_instance_and_group_norm) \
		$(PY) -m pytest -v browser_tests
	@echo "screenshots: build/browser/"

slide-fit: $(BROWSER_STAMP)
	$(PY) -m tools.slide_fit $(if $(LESSONS),--lessons $(LESSONS),)

clean:
	rm -rf $(VENV) build .pytest_cache
