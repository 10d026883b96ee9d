# Thin wrapper over CMake + Ninja. The two commands of the README:
#   make run    build (Release; the CUDA backend too when nvcc exists) and run the main job
#   make test   build and run every test, then again under AddressSanitizer + UBSan (CPU only)
# Build folders: build/ and build-asan/.

JOBS := $(shell nproc 2>/dev/null || echo 2)
# nvcc often lives outside PATH; CMake finds it through PATH.
export PATH := $(PATH):/usr/local/cuda/bin

BUILD := build
ASAN := build-asan
QMM := ./$(BUILD)/qmm

.PHONY: all build run test test-asan clean mlx-venv

all: build

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(QMM) info
	$(QMM) plan --model qwen3-4b --policy seed
	$(QMM) matmul --device auto

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	@# ctest hides a skipped test's output: say here why the GPU tests skipped
	@for t in $(BUILD)/gpu_*; do [ -x "$$t" ] || continue; \
	    out=$$($$t --filter no-such-case 2>&1 | head -n 1); \
	    case "$$out" in SKIP*) echo "$$(basename $$t): $$out";; esac; done
	$(MAKE) --no-print-directory test-asan

test-asan:
	cmake -S . -B $(ASAN) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQMM_SANITIZE=ON -DQMM_CUDA=OFF
	cmake --build $(ASAN) -j $(JOBS)
	ctest --test-dir $(ASAN) --output-on-failure -j $(JOBS)

# The MLX wheels for the MLX reference test (tests/mlx/requirements.txt, pinned), in a venv the
# CMake build finds. Needs PyPI; bash .ci/run calls it, and fails when it fails.
MLX_VENV := $(BUILD)/mlx-venv
mlx-venv:
	@test -x $(MLX_VENV)/bin/python3 || python3 -m venv $(MLX_VENV)
	$(MLX_VENV)/bin/python3 -m pip install -q --disable-pip-version-check -r tests/mlx/requirements.txt
	$(MLX_VENV)/bin/python3 -c "import mlx.core as mx, mlx_lm; print('mlx', mx.__version__, 'on', mx.default_device())"

clean:
	rm -rf $(BUILD) $(ASAN)
