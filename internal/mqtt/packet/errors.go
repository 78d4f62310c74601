package packet

import "errors"

// Sentinel errors classify decode and encode failures; test with errors.Is.
// Every error the codec returns wraps one of them and carries the reason
// code a server should answer with (see CodeOf).
var (
	ErrMalformed          = errors.New("packet: malformed packet")
	ErrProtocol           = errors.New("packet: protocol error")
	ErrTooLarge           = errors.New("packet: packet too large")
	ErrUnsupportedVersion = errors.New("packet: unsupported protocol version")
	ErrTopicAlias         = errors.New("packet: topic alias invalid") // reserved for callers resolving aliases
)

// Error is a codec error with the reason code it maps to.
type Error struct {
	Code ReasonCode
	Msg  string // what was wrong, for logs and reason strings
	kind error  // one of the sentinels
}

func (e *Error) Error() string { return e.kind.Error() + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.kind }

// CodeOf returns the reason code carried by err, or UnspecifiedError.
func CodeOf(err error) ReasonCode {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	switch {
	case errors.Is(err, ErrMalformed):
		return MalformedPacket
	case errors.Is(err, ErrProtocol):
		return ProtocolError
	case errors.Is(err, ErrTooLarge):
		return PacketTooLarge
	case errors.Is(err, ErrUnsupportedVersion):
		return UnsupportedProtocolVersion
	case errors.Is(err, ErrTopicAlias):
		return TopicAliasInvalid
	}
	return UnspecifiedError
}

func malformed(msg string) error { return &Error{Code: MalformedPacket, Msg: msg, kind: ErrMalformed} }
func protocolErr(msg string) error {
	return &Error{Code: ProtocolError, Msg: msg, kind: ErrProtocol}
}
