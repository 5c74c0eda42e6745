#!/usr/bin/env bash
# Regenerates the Go code of the gRPC contract in proto/.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_command protoc protobuf-compiler
gen_go=$(go_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION")
gen_grpc=$(go_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION")
out=${1:-$TAILOR_ROOT/proto}

cd "$TAILOR_ROOT/proto"
mkdir -p "$out"
protoc --plugin=protoc-gen-go="$gen_go" --plugin=protoc-gen-go-grpc="$gen_grpc" \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  tailor/provisioner/v1/provisioner.proto
