package plugin

import (
	"context"
	"errors"
	"fmt"
)

// Code is an error code from a closed set numbered as gRPC's, the same as manent's TypeScript
// Code: an error keeps its meaning from the plugin, across the wire, into the step record.
type Code int

const (
	CodeCanceled           Code = 1
	CodeUnknown            Code = 2
	CodeInvalidArgument    Code = 3
	CodeDeadlineExceeded   Code = 4
	CodeNotFound           Code = 5
	CodeAlreadyExists      Code = 6
	CodePermissionDenied   Code = 7
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeAborted            Code = 10
	CodeOutOfRange         Code = 11
	CodeUnimplemented      Code = 12
	CodeInternal           Code = 13
	CodeUnavailable        Code = 14
	CodeDataLoss           Code = 15
	CodeUnauthenticated    Code = 16
)

var codeNames = map[Code]string{
	CodeCanceled: "canceled", CodeUnknown: "unknown", CodeInvalidArgument: "invalid_argument",
	CodeDeadlineExceeded: "deadline_exceeded", CodeNotFound: "not_found", CodeAlreadyExists: "already_exists",
	CodePermissionDenied: "permission_denied", CodeResourceExhausted: "resource_exhausted",
	CodeFailedPrecondition: "failed_precondition", CodeAborted: "aborted", CodeOutOfRange: "out_of_range",
	CodeUnimplemented: "unimplemented", CodeInternal: "internal", CodeUnavailable: "unavailable",
	CodeDataLoss: "data_loss", CodeUnauthenticated: "unauthenticated",
}

// String is the snake_case name used in JSON and in the manent-error-bin trailer ("aborted").
func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "unknown"
}

// ParseCode reads a snake_case code name; anything else is CodeUnknown.
func ParseCode(name string) Code {
	for c, n := range codeNames {
		if n == name {
			return c
		}
	}
	return CodeUnknown
}

// permanentCodes are the codes a retry of the same input cannot fix: Aborted is what Permanent
// produces, the others are caller mistakes. Same set as the TypeScript isPermanent.
var permanentCodes = map[Code]bool{
	CodeAborted: true, CodeInvalidArgument: true, CodeFailedPrecondition: true, CodePermissionDenied: true,
	CodeUnauthenticated: true, CodeUnimplemented: true, CodeAlreadyExists: true,
}

// Error is an error with a code and machine-readable details (never secret values).
type Error struct {
	Code    Code
	Message string
	Details map[string]string
	Cause   error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds an *Error with a formatted message; a %w verb keeps the wrapped error as Cause.
func Errorf(code Code, format string, args ...any) *Error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: wrapped.Error(), Cause: errors.Unwrap(wrapped)}
}

// CodeOf tells the code of err: an *Error's own, Canceled and DeadlineExceeded for the context
// errors, Unknown for anything else (and for nil).
func CodeOf(err error) Code {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return CodeDeadlineExceeded
	}
	return CodeUnknown
}

// DetailsOf returns the details of the first *Error in err's chain, or nil.
func DetailsOf(err error) map[string]string {
	var e *Error
	if errors.As(err, &e) {
		return e.Details
	}
	return nil
}

// Permanent marks an error that a retry cannot fix (an invalid parameter, a change refused by a
// safety limit): the step fails at once, without retries. It crosses the protocol as gRPC
// ABORTED. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: CodeAborted, Message: err.Error(), Details: DetailsOf(err), Cause: err}
}

// IsPermanent tells whether retrying the operation that failed with err cannot succeed.
func IsPermanent(err error) bool {
	return err != nil && permanentCodes[CodeOf(err)]
}
