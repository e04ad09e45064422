package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/llmserve/llmserve/proto/inferencepb"
)

// grpcMaxMessage bounds the messages the gRPC client sends and takes
// (grpc-go's default of 4 MiB is 1300 rows of a 28x28 image).
const grpcMaxMessage = 256 << 20

// RunV2GRPC runs the V2 infer benchmark over the Open Inference Protocol's
// gRPC service (`llmserve bench --backend v2-grpc`): ModelInfer calls
// through grpc-go and the official proto (proto/inferencepb), one
// connection per client as the REST clients have one keep-alive
// connection each. cfg.BaseURL is the gRPC address (host:port; the scheme
// and path of an http://, https:// or grpc:// URL are dropped). The
// connections are plaintext. With cfg.Binary the
// input travels in raw_input_contents, as Triton's and KServe's gRPC
// clients send it; without, as typed fp32_contents. The model's input comes
// from ModelMetadata unless cfg names it. It fails as RunV2Infer does.
func RunV2GRPC(ctx context.Context, cfg V2Config) (*V2Report, error) {
	cfg.BaseURL = grpcTarget(cfg.BaseURL)
	if err := cfg.check("v2-grpc"); err != nil {
		return nil, err
	}
	if cfg.APIKey != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+cfg.APIKey)
	}
	conns := make([]*grpc.ClientConn, cfg.Concurrency)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	clients := make([]inferencepb.GRPCInferenceServiceClient, len(conns))
	for i := range conns {
		c, err := grpc.NewClient(cfg.BaseURL, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcMaxMessage), grpc.MaxCallSendMsgSize(grpcMaxMessage)))
		if err != nil {
			return nil, fmt.Errorf("bench: gRPC client for %s: %w", cfg.BaseURL, err)
		}
		conns[i], clients[i] = c, inferencepb.NewGRPCInferenceServiceClient(c)
	}
	if cfg.InputName == "" || len(cfg.InputShape) == 0 {
		if err := grpcInput(ctx, clients[0], &cfg); err != nil {
			return nil, err
		}
	}
	reqs, err := grpcRequests(cfg)
	if err != nil {
		return nil, err
	}
	send := func(w, i int) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		t0 := time.Now()
		_, err := clients[w].ModelInfer(ctx, reqs[i%len(reqs)])
		return time.Since(t0), err
	}
	return measureV2(ctx, cfg, "grpc", send)
}

// grpcTarget is a gRPC target from a --base-url: an http://, https:// or
// grpc:// URL gives its host and port; anything else (host:port, or a
// grpc-go target such as dns:///host:port) is taken as it is.
func grpcTarget(base string) string {
	for _, scheme := range []string{"http://", "https://", "grpc://"} {
		if rest, ok := strings.CutPrefix(base, scheme); ok {
			host, _, _ := strings.Cut(rest, "/")
			return host
		}
	}
	return base
}

// grpcInput reads the model's first input from ModelMetadata.
func grpcInput(ctx context.Context, c inferencepb.GRPCInferenceServiceClient, cfg *V2Config) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	md, err := c.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: cfg.Model})
	if err != nil {
		return fmt.Errorf("bench: model metadata: %w", err)
	}
	if len(md.GetInputs()) == 0 {
		return errors.New("bench: the model's metadata lists no inputs")
	}
	in := md.GetInputs()[0]
	if cfg.InputName == "" {
		cfg.InputName = in.GetName()
	}
	if len(cfg.InputShape) == 0 {
		shape := in.GetShape()
		if len(shape) < 1 {
			return fmt.Errorf("bench: input %q has shape %v: no batch dimension", in.GetName(), shape)
		}
		for _, d := range shape[1:] {
			if d < 1 {
				return fmt.Errorf("bench: input %q has shape %v with a variable dimension; give --input-shape", in.GetName(), shape)
			}
		}
		cfg.InputShape = shape[1:]
	}
	return nil
}

// grpcRequests makes numBodies ModelInfer requests with the REST bodies'
// random values. They are only read (marshalled) while the clients run.
func grpcRequests(cfg V2Config) ([]*inferencepb.ModelInferRequest, error) {
	values, err := v2Values(cfg)
	if err != nil {
		return nil, err
	}
	shape := append([]int64{int64(cfg.Rows)}, cfg.InputShape...)
	out := make([]*inferencepb.ModelInferRequest, len(values))
	for i, vals := range values {
		in := &inferencepb.ModelInferRequest_InferInputTensor{Name: cfg.InputName, Datatype: "FP32", Shape: shape}
		r := &inferencepb.ModelInferRequest{ModelName: cfg.Model, Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{in}}
		if cfg.Binary {
			raw := make([]byte, 0, 4*len(vals))
			for _, v := range vals {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
			}
			r.RawInputContents = [][]byte{raw}
		} else {
			in.Contents = &inferencepb.InferTensorContents{Fp32Contents: vals}
		}
		out[i] = r
	}
	return out, nil
}
