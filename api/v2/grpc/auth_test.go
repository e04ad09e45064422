package v2grpc

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestAuthInterceptors(t *testing.T) {
	unary, _ := AuthInterceptors([]string{"k1", "k2"})
	ok := func(context.Context, any) (any, error) { return "done", nil }
	tests := []struct {
		method, auth string
		want         codes.Code
	}{
		{inferencePrefix + "ModelInfer", "", codes.Unauthenticated},
		{inferencePrefix + "ModelInfer", "Bearer k3", codes.Unauthenticated},
		{inferencePrefix + "ModelInfer", "k1", codes.Unauthenticated},
		{inferencePrefix + "ModelInfer", "Bearer k1", codes.OK},
		{inferencePrefix + "ServerLive", "Bearer k2", codes.OK},
		{"/grpc.health.v1.Health/Check", "", codes.OK},
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "", codes.OK},
	}
	for _, tt := range tests {
		ctx := context.Background()
		if tt.auth != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", tt.auth))
		}
		_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: tt.method}, ok)
		if got := status.Code(err); got != tt.want {
			t.Errorf("%s with %q: %v, want %v", tt.method, tt.auth, got, tt.want)
		}
	}
	open, _ := AuthInterceptors(nil)
	if _, err := open(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: inferencePrefix + "ModelInfer"}, ok); err != nil {
		t.Errorf("no keys: %v", err)
	}
}
