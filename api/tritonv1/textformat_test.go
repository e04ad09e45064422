package tritonv1

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	pb "github.com/llmserve/llmserve/proto/tritonpb"
)

// textCases are messages whose text the reference parsers must read back
// as they were: an error with non-ASCII, quotes, newlines and control
// bytes, a response with classes and special floats, a status with maps.
func textCases() []proto.Message {
	return []proto.Message{
		&pb.RequestStatus{Code: pb.RequestStatusCode_INVALID_ARG, Msg: "input \"x\":\u00a0bad\tdims\n[3]\x01 — ünïcode \\ end", ServerId: "llmserve", RequestId: 7},
		&pb.InferResponseHeader{Id: 3, ModelName: "mlp", ModelVersion: 1, BatchSize: 2, Output: []*pb.InferResponseHeader_Output{
			{Name: "probs", BatchClasses: []*pb.InferResponseHeader_Output_Classes{{Cls: []*pb.InferResponseHeader_Output_Class{{Idx: 1, Value: 0.7, Label: "caf\u00e9"}, {Value: float32(math.Inf(-1))}}}}},
			{Name: "label", Raw: &pb.InferResponseHeader_Output_Raw{Dims: []int64{1}, BatchByteSize: 16}},
		}},
		&pb.ServerStatus{Id: "llmserve", Version: "1", ReadyState: pb.ServerReadyState_SERVER_READY, UptimeNs: 9, ModelStatus: map[string]*pb.ModelStatus{
			"b": {Config: &pb.ModelConfig{Name: "b"}, VersionStatus: map[int64]*pb.ModelVersionStatus{-1: {ReadyState: pb.ModelReadyState_MODEL_UNAVAILABLE}}},
			"a": {Config: &pb.ModelConfig{Name: "a", MaxBatchSize: 8, Input: []*pb.ModelInput{{Name: "x", DataType: pb.DataType_TYPE_FP32, Dims: []int64{3, 224, 224}, Format: pb.ModelInput_FORMAT_NCHW, Reshape: &pb.ModelTensorReshape{}}}},
				VersionStatus: map[int64]*pb.ModelVersionStatus{2: {ReadyState: pb.ModelReadyState_MODEL_READY, ModelExecutionCount: 3, ModelInferenceCount: 5,
					InferStats: map[uint32]*pb.InferRequestStats{1: {Success: &pb.StatDuration{Count: 5, TotalTimeNs: 1 << 40}}}}}},
		}},
	}
}

// TestMarshalText: the text is byte-stable, ASCII, one line when asked,
// and Go's parser reads it back as it was.
func TestMarshalText(t *testing.T) {
	for _, m := range textCases() {
		for _, oneLine := range []bool{true, false} {
			b := marshalText(m, oneLine)
			if !bytes.Equal(b, marshalText(m, oneLine)) {
				t.Fatalf("%s: not stable", b)
			}
			for _, c := range b {
				if c >= 0x80 || oneLine && c == '\n' {
					t.Fatalf("%q: byte %#x in the text", b, c)
				}
			}
			got := m.ProtoReflect().New().Interface()
			if err := prototext.Unmarshal(b, got); err != nil || !proto.Equal(got, m) {
				t.Fatalf("%s: read back as %v (%v)", b, got, err)
			}
		}
	}
	if got, want := headerText(&pb.RequestStatus{Code: pb.RequestStatusCode_NOT_FOUND, Msg: "a \"b\"", RequestId: 2}), `code: NOT_FOUND msg: "a \"b\"" request_id: 2`; got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
}

// TestMarshalTextPython: Python's google.protobuf.text_format (Debian's
// python3-protobuf, `make python-deps`) reads every message back as it
// was, one line and multi-line.
func TestMarshalTextPython(t *testing.T) {
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import google.protobuf").CombinedOutput(); err != nil {
		t.Skipf("%s has no google.protobuf (make python-deps installs python3-protobuf): %v %s", python, err, out)
	}
	set := descriptorSet(t, pb.File_src_core_server_status_proto, pb.File_src_core_api_proto, pb.File_src_core_request_status_proto)
	for _, m := range textCases() {
		var in bytes.Buffer
		for _, oneLine := range []bool{true, false} {
			j, _ := json.Marshal(string(marshalText(m, oneLine)))
			in.Write(append(j, '\n'))
		}
		cmd := exec.Command(python, "testdata/textparse.py", set, string(m.ProtoReflect().Descriptor().FullName()))
		cmd.Stdin = &in
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, line := range strings.Fields(string(out)) {
			b, err := hex.DecodeString(line)
			got := m.ProtoReflect().New().Interface()
			if err != nil || proto.Unmarshal(b, got) != nil || !proto.Equal(got, m) {
				t.Fatalf("python read %s as %v, want %v\n%s", marshalText(m, true), got, m, out)
			}
		}
	}
}

// descriptorSet writes the files (and what they import) as a
// FileDescriptorSet and returns its path.
func descriptorSet(t *testing.T, files ...protoreflect.FileDescriptor) string {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := range fd.Imports().Len() {
			imp, err := protoregistry.GlobalFiles.FindFileByPath(fd.Imports().Get(i).Path())
			if err != nil {
				t.Fatal(err)
			}
			add(imp)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	for _, fd := range files {
		add(fd)
	}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "descriptors.pb")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
