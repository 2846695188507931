package external

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/manent-deployer/manent/sdk/go/plugin"
	pb "github.com/manent-deployer/manent/sdk/go/proto"
)

// toStatus turns a plugin error into the gRPC status it crosses the wire with, and attaches the
// ErrorTrailer (code, details, and the partial result of a failed deploy) to the call.
// plugin.Code is numbered as gRPC's, so the code maps one to one.
func toStatus(ctx context.Context, err error, partial *plugin.Result) error {
	code := plugin.CodeOf(err)
	if code <= 0 || code > plugin.CodeUnauthenticated {
		code = plugin.CodeUnknown // an *Error built with code 0 must not cross as OK
	}
	detail := &pb.ErrorDetail{
		Code:          code.String(),
		Message:       err.Error(),
		Details:       plugin.DetailsOf(err),
		PartialResult: ResultToProto(partial),
	}
	if b, merr := proto.Marshal(detail); merr == nil {
		// A "-bin" key: grpc-go base64-encodes the bytes on the wire. A failure to set the
		// trailer loses only the extras; the status below still carries code and message.
		_ = grpc.SetTrailer(ctx, metadata.Pairs(ErrorTrailer, string(b)))
	}
	return status.Error(codes.Code(code), err.Error())
}

// FromStatus rebuilds a plugin error from a failed gRPC call: the status code and message, and
// from the ErrorTrailer, when present, the details and the partial result (nil when none).
func FromStatus(err error, trailer metadata.MD) (*plugin.Error, *plugin.Result) {
	if err == nil {
		return nil, nil
	}
	st, ok := status.FromError(err)
	if !ok {
		var pe *plugin.Error
		if errors.As(err, &pe) {
			return pe, nil
		}
		return &plugin.Error{Code: plugin.CodeOf(err), Message: err.Error(), Cause: err}, nil
	}
	out := &plugin.Error{Code: plugin.Code(st.Code()), Message: st.Message(), Cause: err}
	var partial *plugin.Result
	if vals := trailer.Get(ErrorTrailer); len(vals) > 0 {
		var detail pb.ErrorDetail
		if proto.Unmarshal([]byte(vals[0]), &detail) == nil {
			out.Details = nilIfEmpty(detail.GetDetails())
			partial = ResultFromProto(detail.GetPartialResult())
		}
	}
	return out, partial
}
