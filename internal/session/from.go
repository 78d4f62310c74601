package session

import (
	"fmt"
	"strconv"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// FromProperty is the SUBSCRIBE user property that asks for the history of
// sequenced topics before their live messages.
const FromProperty = "sx-from"

// FromKind says where a replay of history starts.
type FromKind byte

// Kinds of sx-from.
const (
	FromNone     FromKind = iota // no replay: live messages only
	FromEarliest                 // the first message retention kept
	FromLatest                   // each matching topic's latest message
	FromIndex                    // the message with index Index (or the first kept after it)
)

// From is a parsed sx-from value.
type From struct {
	Kind  FromKind
	Index uint64 // FromIndex: from 1
}

// ParseFrom parses an sx-from value: "earliest", "latest" or an index
// (a decimal integer from 1).
func ParseFrom(v string) (From, error) {
	switch v {
	case "earliest":
		return From{Kind: FromEarliest}, nil
	case "latest":
		return From{Kind: FromLatest}, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return From{}, fmt.Errorf("%s=%q: want earliest, latest or an index from 1", FromProperty, v)
	}
	return From{Kind: FromIndex, Index: n}, nil
}

func (f From) String() string {
	switch f.Kind {
	case FromEarliest:
		return "earliest"
	case FromLatest:
		return "latest"
	case FromIndex:
		return strconv.FormatUint(f.Index, 10)
	}
	return ""
}

// fromProperty finds sx-from among a SUBSCRIBE's user properties; more
// than one is an error.
func fromProperty(user []packet.UserProperty) (From, error) {
	var f From
	seen := false
	for _, u := range user {
		if u.Key != FromProperty {
			continue
		}
		if seen {
			return From{}, fmt.Errorf("%s given twice", FromProperty)
		}
		seen = true
		var err error
		if f, err = ParseFrom(u.Value); err != nil {
			return From{}, err
		}
	}
	return f, nil
}
