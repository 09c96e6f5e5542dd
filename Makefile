# The two set-up commands of the README. Both install missing Debian packages first.
.PHONY: demo test deps lint install-check python-test clean

JOBS ?= $(shell nproc)

deps:
	@scripts/install-deps.sh

# Release build, then the demonstration suite on its embedded defaults -> results/.
demo: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)
	/usr/bin/python3 scripts/demo.py --build-dir build/release --out results

# Every test: debug (GCC, ASan+UBSan, leak check) and tsan (Clang 15) presets, then the lint
# checks and an out-of-tree find_package(mxtasking) build. Fails on the first failure.
test: deps
	cmake --preset debug
	cmake --build --preset debug -j $(JOBS)
	ctest --preset debug -j $(JOBS)
	cmake --preset tsan
	cmake --build --preset tsan -j $(JOBS)
	ctest --preset tsan -j $(JOBS)
	$(MAKE) lint install-check python-test

lint:
	cmake --build --preset tsan --target format-check
	cmake --build --preset tsan --target tidy

install-check:
	@scripts/check-install.sh

# The tunadb Python package (python/): built into build/venv (release build of the engine kept in
# build/python, so later runs compile only what changed; without build isolation, so that the
# kept build always finds the same nanobind), then its pytest suite.
python-test: deps
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) build/venv/bin/python -m pip install -q --disable-pip-version-check \
	  --no-build-isolation ./python
	build/venv/bin/python -m pytest -q python/tests

clean:
	rm -rf build
