package session

import (
	"testing"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

func TestParseFrom(t *testing.T) {
	for v, want := range map[string]From{
		"earliest": {Kind: FromEarliest}, "latest": {Kind: FromLatest},
		"1": {Kind: FromIndex, Index: 1}, "18446744073709551615": {Kind: FromIndex, Index: 1<<64 - 1},
	} {
		got, err := ParseFrom(v)
		if err != nil || got != want || got.String() != v {
			t.Errorf("ParseFrom(%q) = %+v, %v", v, got, err)
		}
	}
	for _, v := range []string{"", "0", "-1", "Earliest", "1.5", "18446744073709551616", " 1"} {
		if _, err := ParseFrom(v); err == nil {
			t.Errorf("ParseFrom(%q) accepted", v)
		}
	}
	if _, err := fromProperty([]packet.UserProperty{{Key: FromProperty, Value: "1"}, {Key: FromProperty, Value: "2"}}); err == nil {
		t.Error("two sx-from accepted")
	}
	if f, err := fromProperty([]packet.UserProperty{{Key: "other", Value: "x"}}); err != nil || f.Kind != FromNone {
		t.Errorf("no sx-from: %+v, %v", f, err)
	}
}
