package fsm

import (
	"errors"
	"fmt"
)

// Sentinels that *Error unwraps to, by Code.
var (
	ErrInvalid  = errors.New("fsm: invalid")
	ErrConflict = errors.New("fsm: version conflict")
	ErrNotFound = errors.New("fsm: not found")
)

// Code classifies an Error. Codes are stable: they travel in Results and in
// the admin API.
type Code string

const (
	CodeInvalid  Code = "invalid"
	CodeConflict Code = "conflict"
	CodeNotFound Code = "not_found"
)

// Error is a rejected command or an undecodable input. It survives a JSON
// round trip, so a Result forwarded from the leader keeps it.
type Error struct {
	Code   Code   `json:"code"`
	Field  string `json:"field,omitempty"` // path of the offending field, e.g. "rules[2].replicas"
	Reason string `json:"reason"`
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%v: %s", e.Unwrap(), e.Reason)
	}
	return fmt.Sprintf("%v: %s: %s", e.Unwrap(), e.Field, e.Reason)
}

// Unwrap returns the sentinel of e's Code.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeConflict:
		return ErrConflict
	case CodeNotFound:
		return ErrNotFound
	}
	return ErrInvalid
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Field: field, Reason: fmt.Sprintf(format, args...)}
}
