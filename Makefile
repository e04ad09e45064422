# llmserve — build, run and test.
#
# `make run` and `make test` work on a fresh Debian machine: they install the
# C headers llama.cpp needs (and, for `make test`, the headless Chromium the
# chat page's browser test drives) and download Go modules by themselves.
#
# CGO_CPPFLAGS is one fixed value on every build and in every clone: Go keys
# its cache of the compiled llama.cpp on it, and any change (a path inside the
# checkout, a flag added for one target) recompiles all of llama.cpp, which
# takes minutes on two cores. It names only the user cache dir and the Go
# module cache. Do not add per-target cgo flags.

SHELL := /bin/bash
GO ?= go

OLLAMA_VERSION := v0.17.4
MALGO_VERSION  := v0.11.24
# The Swagger UI served at /v2/docs (api/dataplane/swaggerui, committed).
SWAGGER_UI_VERSION := 5.32.0

GOMODCACHE   := $(shell $(GO) env GOMODCACHE)
OLLAMA_DIR   := $(GOMODCACHE)/github.com/ollama/ollama@$(OLLAMA_VERSION)
MALGO_DIR    := $(GOMODCACHE)/github.com/gen2brain/malgo@$(MALGO_VERSION)
CACHE_DIR    := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/llmserve
INCLUDE_DIR  := $(CACHE_DIR)/include

# ggml's CPU kernels pick their SIMD code with the compiler's target macros
# (__AVX2__, __FMA__, __F16C__, ...), and ollama's cgo directives pass no
# -march: without one, cgo builds them for baseline x86-64 (SSE2), several
# times slower. x86-64-v3 (AVX2, FMA, F16C; every x86 server CPU since 2013)
# is the portable default; CPU_ARCH=native builds for this machine only.
# -O3, as llama.cpp's own build: llamafile's templated kernels (C++) are
# 20-30% faster than at -O2 (docs/design/decisions.md).
ARCH := $(shell uname -m)
ifeq ($(ARCH),x86_64)
CPU_ARCH ?= x86-64-v3
else ifeq ($(ARCH),aarch64)
CPU_ARCH ?= armv8.2-a+fp16+dotprod
endif
CPU_FLAGS := -O3 $(if $(CPU_ARCH),-march=$(CPU_ARCH))

export CGO_ENABLED  := 1
export CGO_CPPFLAGS := -I$(INCLUDE_DIR) -I$(OLLAMA_DIR)/llama/llama.cpp/include -I$(OLLAMA_DIR)/ml/backend/ggml/ggml/include
export CGO_CFLAGS   := $(CPU_FLAGS)
export CGO_CXXFLAGS := $(CPU_FLAGS)

BIN        := bin/llmserve
# The commit `llmserve version` (and a worker's Info) names: Go's own VCS
# stamp is off where GOFLAGS has -buildvcs=false, and absent outside a
# checkout, so the Makefile passes it (main.commit) when git knows it.
# Only the link step changes with it; the cgo flags stay as they are.
COMMIT     := $(shell git rev-parse HEAD 2>/dev/null)$(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo -dirty)
LDFLAGS    := $(if $(COMMIT),-X main.commit=$(COMMIT))
HTTP_PORT  ?= 8080
GRPC_PORT  ?= 8081
# make run MODEL=path.gguf serves that model; ARGS adds serve flags.
MODEL      ?=
ARGS       ?=

# Packages that do not link llama.cpp get the race detector; the binding and
# the packages that link it do not (it would instrument llama.cpp too).
# A package links it when its test binary does: when engine/llamacpp is
# among the dependencies of its tests (go list -test, the pkg.test line),
# whatever the route. That is no longer all of models/ and api/: the V2
# protocols (api/v2/..., api/kservev1, api/tritonv1) and models/runtime
# reach the models through interfaces and package oip (api/v2/doc.go).
PKG_DEPS   = $(GO) list -test -f '{{.ImportPath}} {{join .Deps " "}} ' ./... | sed -n 's/^\([^ ]*\)\.test /\1 /p'
LINKS_CGO := llmserve/engine/llamacpp 
PURE_PKGS  = $(shell $(PKG_DEPS) | grep -Ev '$(LINKS_CGO)' | cut -d' ' -f1)
CGO_PKGS   = $(shell $(PKG_DEPS) | grep -E '$(LINKS_CGO)' | cut -d' ' -f1)

GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

# Pinned tools, installed into the user cache dir. grpcurl drives the V2
# gRPC tests through server reflection; the protoc plugins regenerate
# the packages under proto/ (`make proto`, which also
# needs Debian's protobuf-compiler and libprotobuf-dev; the generated code is committed, so
# building needs none of them).
TOOLS_DIR           := $(CACHE_DIR)/bin
GRPCURL_VERSION     := v1.9.3
GRPCURL             := $(TOOLS_DIR)/grpcurl-$(GRPCURL_VERSION)
# The official SDKs the API tests drive (npm registry, pinned): OpenAI's
# (Responses) and Anthropic's (Messages), and onnxruntime-node (the ONNX
# corpus's references), installed by `make node-clients`.
OPENAI_NODE_VERSION    := 7.57.0
ANTHROPIC_NODE_VERSION := 1.14.0
ORT_NODE_VERSION       := 1.22.0
NODE_CLIENTS           := $(CACHE_DIR)/node-clients-$(OPENAI_NODE_VERSION)-$(ANTHROPIC_NODE_VERSION)-ort$(ORT_NODE_VERSION)
# The agent CLIs the agent-session tests run unchanged (npm registry, pinned):
# Claude Code and OpenAI's Codex CLI; each ships its native binary in a
# per-platform npm package. `make agent-clis` installs them; tests find
# `claude` and `codex` in LLMSERVE_AGENT_CLIS, which `make test-cgo` sets.
CLAUDE_CODE_VERSION    := 2.1.332
CODEX_VERSION          := 0.171.0
AGENT_CLIS             := $(CACHE_DIR)/agent-clis-claude$(CLAUDE_CODE_VERSION)-codex$(CODEX_VERSION)
AGENT_CLIS_BIN         := $(AGENT_CLIS)/node_modules/.bin
PROTOC_GEN_GO       := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC  := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2

.PHONY: all build cuda run test test-pure test-cgo test-deploy test-python python-proto grpcurl node-clients agent-clis proto protoc-plugins test-determinism fuzz deps debian-deps python-deps browser-deps go-deps bench soak lint verify fmt clean env swagger-ui

all: build

# apt_install PACKAGES: the recipe that installs those of the Debian
# PACKAGES that are missing (with sudo when not root; apt-get update first
# when the install fails on stale lists).
define apt_install
	@missing=""; \
	for p in $(1); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
	  $$sudo apt-get install -y --no-install-recommends $$missing || \
	  { $$sudo apt-get update && $$sudo apt-get install -y --no-install-recommends $$missing; }; \
	fi
endef

## deps: install what the build needs (Debian headers, Go modules, miniaudio.h,
## libmtmd's headers).
deps: debian-deps go-deps $(INCLUDE_DIR)/miniaudio/miniaudio.h $(INCLUDE_DIR)/mtmd/mtmd.h $(INCLUDE_DIR)/mtmd/mtmd-helper.h

# DEBIAN_DEPS are the headers the build needs (deploy/'s Dockerfile test
# checks the images install the same).
DEBIAN_DEPS := nlohmann-json3-dev libstb-dev

debian-deps:
	$(call apt_install,$(DEBIAN_DEPS))

## python-deps: python3-grpcio, python3-numpy and python3-protobuf for the
## custom runtime package (runtimes/python) and its tests, python3-pandas
## for its mlserver.codecs.PandasCodec, and python3-onnx for the ONNX test
## corpus (scripts/onnx-corpus), all run by /usr/bin/python3; `make test`
## runs this. The build does not need them.
python-deps:
	$(call apt_install,python3-grpcio python3-numpy python3-protobuf python3-pandas python3-onnx)

## browser-deps: headless Chromium for the chat page's browser test
## (tests/webui_test.go), which fails without it; `make test` runs this.
browser-deps:
	@if ! { command -v chromium || command -v chromium-browser || command -v google-chrome; } >/dev/null 2>&1; then \
	  echo "installing Debian package: chromium"; \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
	  $$sudo apt-get install -y --no-install-recommends chromium || \
	  { $$sudo apt-get update && $$sudo apt-get install -y --no-install-recommends chromium; }; \
	fi

go-deps:
	@$(GO) mod download
	@$(GO) mod download github.com/ollama/ollama@$(OLLAMA_VERSION) github.com/gen2brain/malgo@$(MALGO_VERSION)

$(INCLUDE_DIR)/miniaudio/miniaudio.h: | go-deps
	@mkdir -p $(INCLUDE_DIR)/miniaudio
	@ln -sfn $(MALGO_DIR)/miniaudio.h $@

# libmtmd (llama.cpp's multimodal library) is compiled and linked by the
# ollama module's llama package; engine/llamacpp includes its headers as
# "mtmd/mtmd.h" through links in the include folder, so CGO_CPPFLAGS stays
# the same (a change would rebuild all of llama.cpp).
$(INCLUDE_DIR)/mtmd/%.h: | go-deps
	@mkdir -p $(INCLUDE_DIR)/mtmd
	@ln -sfn $(OLLAMA_DIR)/llama/llama.cpp/tools/mtmd/$*.h $@

## build: build bin/llmserve.
build: deps
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/llmserve

## cuda: build ggml's CUDA backend from the ollama module's sources (CMake,
## nvcc, ninja when present) into lib/ollama, where bin/llmserve loads GPU
## backends from (<exe>/../lib/ollama): libggml-cuda.so and the
## libggml-base.so it links, with an rpath of $ORIGIN and the toolkit's
## lib64 (cuBLAS, cudart). Then serve with --n-gpu-layers -1.
## CUDA_ARCHITECTURES: CMake's list ("native": the GPUs of this machine;
## "80;90" for A100 and H100). NVCC: the compiler (default: on PATH, else
## /usr/local/cuda/bin/nvcc). The CPU build needs none of this.
CUDA_ARCHITECTURES ?= native
CUDA_BUILD_DIR     := $(CACHE_DIR)/cuda-build-$(OLLAMA_VERSION)
CUDA_LIB_DIR       := lib/ollama
NVCC               ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_GENERATOR      = $(if $(shell command -v ninja 2>/dev/null),-G Ninja)
CUDA_CMAKE_ARGS     = -S $(OLLAMA_DIR) -B $(CUDA_BUILD_DIR) $(CUDA_GENERATOR) \
	-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=$(NVCC) \
	-DCMAKE_CUDA_ARCHITECTURES='$(CUDA_ARCHITECTURES)' \
	-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
	-DCMAKE_INSTALL_RPATH='$$ORIGIN;$(abspath $(dir $(NVCC))../lib64)'

cuda: go-deps
	@[ -n "$(NVCC)" ] && [ -x "$(NVCC)" ] || { echo "make cuda: nvcc not found (not on PATH, not /usr/local/cuda/bin/nvcc): install the CUDA toolkit (NVIDIA's cuda-toolkit-12-x, or Debian's nvidia-cuda-toolkit) or set NVCC=/path/to/nvcc" >&2; exit 1; }
	@command -v cmake >/dev/null || { echo "make cuda: cmake not found: apt-get install cmake (3.21 or newer; ninja-build makes it faster)" >&2; exit 1; }
	cmake $(CUDA_CMAKE_ARGS)
	cmake --build $(CUDA_BUILD_DIR) --target ggml-base ggml-cuda --parallel
	@mkdir -p $(CUDA_LIB_DIR)
	cp -a $(CUDA_BUILD_DIR)/lib/ollama/libggml-cuda.so $(CUDA_BUILD_DIR)/lib/ollama/libggml-base.so* $(CUDA_LIB_DIR)/
	@echo "ggml CUDA backend in $(CUDA_LIB_DIR)/: bin/llmserve serve --n-gpu-layers -1 ... uses it"

## run: serve the embedded default model (or MODEL=path.gguf) on :8080 (HTTP) and :8081 (gRPC).
run: build
	./$(BIN) serve --http-port $(HTTP_PORT) --grpc-port $(GRPC_PORT) $(if $(MODEL),--model $(MODEL)) $(ARGS)

## test: every test, race detector on the pure-Go packages.
test: deps browser-deps python-deps grpcurl node-clients agent-clis test-pure test-cgo test-deploy test-python

## test-python: the custom runtime package's tests (runtimes/python: its
## llmserve_runtime and mlserver packages, MLServer's codec test cases
## ported), on Debian's /usr/bin/python3 with python3-grpcio, -numpy,
## -protobuf and -pandas.
PYTHON := /usr/bin/python3
test-python: python-deps
	$(PYTHON) -m unittest discover -s runtimes/python/tests

## test-deploy: the deployment files (deploy/, its own Go module): Dockerfiles,
## Kubernetes manifests and the Helm chart, decoded into the upstream types.
test-deploy:
	cd deploy && CGO_ENABLED=0 $(GO) test -count=1 ./...

test-pure:
	$(GO) test -race -count=1 $(PURE_PKGS)

test-cgo:
	LLMSERVE_GRPCURL=$(GRPCURL) LLMSERVE_NODE_MODULES=$(NODE_CLIENTS)/node_modules LLMSERVE_AGENT_CLIS=$(AGENT_CLIS_BIN) $(GO) test -count=1 -timeout 20m $(CGO_PKGS)

## node-clients: the pinned openai and @anthropic-ai/sdk npm packages the
## API tests run under node, and onnxruntime-node, which computes the ONNX
## corpus's references (LLMSERVE_NODE_MODULES); needs node and npm.
## --ignore-scripts: onnxruntime-node's install script fetches GPU files
## from a host this build does not reach; its CPU library is in the package.
node-clients: $(NODE_CLIENTS)/node_modules

$(NODE_CLIENTS)/node_modules:
	@command -v npm >/dev/null || { echo "make node-clients: npm not found (Debian: apt-get install nodejs npm)"; exit 1; }
	@rm -rf $(NODE_CLIENTS).tmp && mkdir -p $(NODE_CLIENTS).tmp
	cd $(NODE_CLIENTS).tmp && echo '{"private":true}' > package.json && \
	  npm install --silent --no-audit --no-fund --ignore-scripts openai@$(OPENAI_NODE_VERSION) @anthropic-ai/sdk@$(ANTHROPIC_NODE_VERSION) onnxruntime-node@$(ORT_NODE_VERSION)
	rm -rf $(NODE_CLIENTS) && mv $(NODE_CLIENTS).tmp $(NODE_CLIENTS)

## agent-clis: the pinned Claude Code (@anthropic-ai/claude-code) and Codex
## CLI (@openai/codex) the agent-session tests run, then a check that both
## native binaries start (`--version`, offline); prints the directory that
## holds `claude` and `codex` (LLMSERVE_AGENT_CLIS). Needs node and npm.
## --ignore-scripts, then Claude Code's own postinstall run by hand: it copies
## the platform's native binary over its placeholder, whether or not this
## npm runs install scripts. Codex's launcher finds its binary by itself.
agent-clis: $(AGENT_CLIS)/node_modules
	@v=$$(DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 $(AGENT_CLIS_BIN)/claude --version) && \
	  case "$$v" in "$(CLAUDE_CODE_VERSION) "*) ;; *) echo "make agent-clis: claude --version printed '$$v', want $(CLAUDE_CODE_VERSION)"; exit 1;; esac
	@h=$$(mktemp -d) && v=$$(CODEX_HOME=$$h $(AGENT_CLIS_BIN)/codex --version 2>/dev/null); rm -rf $$h; \
	  case "$$v" in *" $(CODEX_VERSION)") ;; *) echo "make agent-clis: codex --version printed '$$v', want $(CODEX_VERSION)"; exit 1;; esac
	@echo "LLMSERVE_AGENT_CLIS=$(AGENT_CLIS_BIN)"

$(AGENT_CLIS)/node_modules:
	@command -v npm >/dev/null || { echo "make agent-clis: npm not found (Debian: apt-get install nodejs npm)"; exit 1; }
	@rm -rf $(AGENT_CLIS).tmp && mkdir -p $(AGENT_CLIS).tmp
	cd $(AGENT_CLIS).tmp && echo '{"private":true}' > package.json && \
	  npm install --silent --no-audit --no-fund --ignore-scripts --engine-strict=false \
	    @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION)
	cd $(AGENT_CLIS).tmp/node_modules/@anthropic-ai/claude-code && node install.cjs
	rm -rf $(AGENT_CLIS) && mv $(AGENT_CLIS).tmp $(AGENT_CLIS)

## grpcurl: the pinned grpcurl the V2 gRPC tests run (tests/v2_grpcurl_test.go).
grpcurl: $(GRPCURL)

$(GRPCURL):
	@mkdir -p $(TOOLS_DIR)/grpcurl.tmp
	GOBIN=$(TOOLS_DIR)/grpcurl.tmp CGO_ENABLED=0 $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
	mv $(TOOLS_DIR)/grpcurl.tmp/grpcurl $@ && rmdir $(TOOLS_DIR)/grpcurl.tmp

## protoc-plugins: the pinned protoc-gen-go and protoc-gen-go-grpc.
protoc-plugins:
	GOBIN=$(TOOLS_DIR) CGO_ENABLED=0 $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(TOOLS_DIR) CGO_ENABLED=0 $(GO) install $(PROTOC_GEN_GO_GRPC)

## proto: regenerate the generated packages, all under proto/: Triton's
## model configuration (proto/tritonconfigpb) and the V2 gRPC code
## (proto/inferencepb) from Triton's protos, Triton v1's (proto/tritonpb)
## from the TensorRT Inference Server's, the ONNX types (proto/onnxpb) and
## the internal worker service's (proto/workerpb) from ours (needs protoc).
proto: protoc-plugins
	PATH="$(TOOLS_DIR):$$PATH" $(GO) generate ./proto/...

## python-proto: regenerate the custom runtime package's Python messages
## (runtimes/python/llmserve_runtime/open_inference_grpc_pb2.py) from the
## Open Inference Protocol's proto with Debian's protoc (3.21, matching
## python3-protobuf); the generated file is committed.
python-proto:
	protoc -I runtimes/python/proto --python_out=runtimes/python/llmserve_runtime runtimes/python/proto/open_inference_grpc.proto

## swagger-ui: re-vendor the pinned swagger-ui-dist (npm) into
## api/dataplane/swaggerui: only the files /v2/docs loads, their licenses
## and a PROVENANCE file. The copy is committed; builds do not need npm.
swagger-ui:
	@rm -rf $(TOOLS_DIR)/swagger-ui.tmp && mkdir -p $(TOOLS_DIR)/swagger-ui.tmp
	cd $(TOOLS_DIR)/swagger-ui.tmp && npm pack --silent swagger-ui-dist@$(SWAGGER_UI_VERSION) && tar xzf swagger-ui-dist-$(SWAGGER_UI_VERSION).tgz
	@d=api/dataplane/swaggerui; p=$(TOOLS_DIR)/swagger-ui.tmp/package; \
	rm -rf $$d && mkdir -p $$d && \
	cp $$p/swagger-ui-bundle.js $$p/swagger-ui-bundle.js.LICENSE.txt $$p/swagger-ui.css $$p/favicon-32x32.png $$p/LICENSE $$p/NOTICE $$d/ && \
	{ echo "swagger-ui-dist $(SWAGGER_UI_VERSION) from the npm registry (https://www.npmjs.com/package/swagger-ui-dist),"; \
	  echo "fetched by 'make swagger-ui'. Files copied unchanged from the package: swagger-ui-bundle.js,"; \
	  echo "swagger-ui-bundle.js.LICENSE.txt, swagger-ui.css, favicon-32x32.png, LICENSE (Apache-2.0), NOTICE."; \
	  echo "Package tarball sha512 (npm's integrity): $$(cd $(TOOLS_DIR)/swagger-ui.tmp && npm view --silent swagger-ui-dist@$(SWAGGER_UI_VERSION) dist.integrity)"; \
	  echo "sha256 of the copied files:"; (cd $$d && sha256sum swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt swagger-ui.css favicon-32x32.png LICENSE NOTICE); } > $$d/PROVENANCE
	rm -rf $(TOOLS_DIR)/swagger-ui.tmp

## bench: measure throughput at several concurrencies (see docs/BENCHMARKS.md).
bench: build
	./scripts/bench.sh

## soak: serve the embedded model under mixed traffic for SOAK seconds
## (default 480), sampling RSS and /metrics into bench-results/soak; fails
## if a request fails or RSS exceeds 1.15 × its memory caps. PREFIX_CACHE
## (default 1GiB) and SERVE_ARGS pass on to the server (docs/BENCHMARKS.md).
soak: build
	./scripts/soak.sh

## fuzz: the request fuzzer on the real binary for FUZZ_TIME (default 10m),
## then every native fuzz target in the module (each `func FuzzX` beside the
## parser it covers: every reader of client bytes has one) for FUZZ_TIME each.
FUZZ_TIME ?= 10m
fuzz: deps
	LLMSERVE_FUZZ_DURATION=$(FUZZ_TIME) $(if $(FUZZ_SEED),LLMSERVE_FUZZ_SEED=$(FUZZ_SEED)) \
	  $(GO) test -count=1 -timeout 0 -run '^TestRequestFuzzer$$' -v ./tests/
	set -e; git grep -l '^func Fuzz' -- '*_test.go' ':!deploy' | while read -r f; do \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "== $$t ./$$(dirname $$f)"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZ_TIME) -fuzzminimizetime 10s -parallel 1 ./$$(dirname $$f)/; \
	  done; \
	done

## test-determinism: the determinism tests 20 times while two busy loops
## load the CPU; every run must pass.
test-determinism: deps
	./scripts/test-determinism.sh

## lint: gofmt, go vet (with and without cgo), golangci-lint (.golangci.yml);
## deploy/ (its own module) too.
lint: deps
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) vet ./...
	$(GO) run $(GOLANGCI_LINT) run ./...
	cd deploy && CGO_ENABLED=0 $(GO) vet ./...
	cd deploy && $(GO) run $(GOLANGCI_LINT) run ./...

## verify: lint, and go.mod/go.sum tidy (the server's module and deploy/'s).
verify: lint
	$(GO) mod tidy -diff
	cd deploy && $(GO) mod tidy -diff

fmt:
	gofmt -w .

## env: print the environment the Makefile builds with (for go test by hand).
env:
	@echo "export CGO_ENABLED=$(CGO_ENABLED)"
	@echo "export CGO_CPPFLAGS='$(CGO_CPPFLAGS)'"
	@echo "export CGO_CFLAGS='$(CGO_CFLAGS)'"
	@echo "export CGO_CXXFLAGS='$(CGO_CXXFLAGS)'"

clean:
	rm -rf bin lib
