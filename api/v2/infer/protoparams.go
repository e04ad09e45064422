package infer

import (
	"encoding/json"
	"fmt"

	pb "github.com/llmserve/llmserve/proto/inferencepb"
)

// ProtoParameters is p in the gRPC form (the V2 gRPC service's answers, a
// custom runtime's requests); a value of another type (generate's stop
// list) goes as its JSON text.
func ProtoParameters(p Parameters) map[string]*pb.InferParameter {
	if len(p) == 0 {
		return nil
	}
	m := make(map[string]*pb.InferParameter, len(p))
	for k, v := range p {
		switch x := v.(type) {
		case bool:
			m[k] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: x}}
		case int64:
			m[k] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: x}}
		case uint64:
			m[k] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: x}}
		case float64:
			m[k] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_DoubleParam{DoubleParam: x}}
		case string:
			m[k] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: x}}
		default:
			if b, err := json.Marshal(x); err == nil {
				m[k] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: string(b)}}
			}
		}
	}
	return m
}

// ParametersFromProto reads gRPC parameters (the V2 gRPC service's
// requests, a custom runtime's answers); a parameter without a value is
// an error naming it.
func ParametersFromProto(m map[string]*pb.InferParameter) (Parameters, error) {
	if len(m) == 0 {
		return nil, nil
	}
	p := make(Parameters, len(m))
	for k, v := range m {
		switch x := v.GetParameterChoice().(type) {
		case *pb.InferParameter_BoolParam:
			p[k] = x.BoolParam
		case *pb.InferParameter_Int64Param:
			p[k] = x.Int64Param
		case *pb.InferParameter_StringParam:
			p[k] = x.StringParam
		case *pb.InferParameter_DoubleParam:
			p[k] = x.DoubleParam
		case *pb.InferParameter_Uint64Param:
			p[k] = x.Uint64Param
		case nil:
			return nil, fmt.Errorf("parameter %q has no value", truncate(k))
		}
	}
	return p, nil
}
