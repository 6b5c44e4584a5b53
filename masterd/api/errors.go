package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes of the JSON error body.
const (
	CodeInvalidArgument    = "invalid_argument"
	CodeUnauthenticated    = "unauthenticated"
	CodePermissionDenied   = "permission_denied"
	CodeNotFound           = "not_found"
	CodeConflict           = "conflict"
	CodeCapacityExceeded   = "capacity_exceeded"
	CodePreconditionFailed = "precondition_failed"
	CodePayloadTooLarge    = "payload_too_large"
	CodeRateLimited        = "rate_limited"
	CodeNoLeader           = "no_leader"
	CodeInternal           = "internal"
)

var codeStatus = map[string]int{
	CodeInvalidArgument:    http.StatusBadRequest,
	CodeUnauthenticated:    http.StatusUnauthorized,
	CodePermissionDenied:   http.StatusForbidden,
	CodeNotFound:           http.StatusNotFound,
	CodeConflict:           http.StatusConflict,
	CodeCapacityExceeded:   http.StatusConflict,
	CodePreconditionFailed: http.StatusPreconditionFailed,
	CodePayloadTooLarge:    http.StatusRequestEntityTooLarge,
	CodeRateLimited:        http.StatusTooManyRequests,
	CodeNoLeader:           http.StatusServiceUnavailable,
	CodeInternal:           http.StatusInternalServerError,
}

// Error is the error every allot API answers with, and the error the client
// returns for a non-2xx answer.
type Error struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// Status is the HTTP status it came with (not part of the body).
	Status int `json:"-"`
}

// ErrorBody is the JSON envelope: {"error": {...}}.
type ErrorBody struct {
	Error *Error `json:"error"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// HTTPStatus is the status code that goes with the error's code.
func (e *Error) HTTPStatus() int {
	if s, ok := codeStatus[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Errorf builds an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	e := &Error{Code: code, Message: fmt.Sprintf(format, args...)}
	e.Status = e.HTTPStatus()
	return e
}

// WithDetails returns e with details set.
func (e *Error) WithDetails(details map[string]any) *Error {
	e.Details = details
	return e
}

// ErrorCode returns the code of an *Error in err's chain, or "".
func ErrorCode(err error) string {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr.Code
	}
	return ""
}

// IsNotFound reports whether err is a not_found error.
func IsNotFound(err error) bool { return ErrorCode(err) == CodeNotFound }

// IsPreconditionFailed reports whether err is a failed If-Match/If-None-Match.
func IsPreconditionFailed(err error) bool { return ErrorCode(err) == CodePreconditionFailed }

// IsConflict reports whether err is a conflict error.
func IsConflict(err error) bool { return ErrorCode(err) == CodeConflict }

// IsCapacityExceeded reports whether err is a capacity_exceeded error.
func IsCapacityExceeded(err error) bool { return ErrorCode(err) == CodeCapacityExceeded }
