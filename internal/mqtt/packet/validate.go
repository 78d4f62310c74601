package packet

// reasonAllowed reports whether MQTT 5 lets packet type t carry reason code
// c (the reason code tables of MQTT 5 §3.2.2.2, §3.4.2.1, §3.5.2.1,
// §3.6.2.1, §3.7.2.1, §3.9.3, §3.11.3, §3.14.2.1 and §3.15.2.1).
func reasonAllowed(t Type, c ReasonCode) bool {
	switch t {
	case CONNACK:
		switch c {
		case Success, UnspecifiedError, MalformedPacket, ProtocolError, ImplementationSpecificError,
			UnsupportedProtocolVersion, ClientIdentifierNotValid, BadUserNameOrPassword, NotAuthorized,
			ServerUnavailable, ServerBusy, Banned, BadAuthenticationMethod, TopicNameInvalid,
			PacketTooLarge, QuotaExceeded, PayloadFormatInvalid, RetainNotSupported, QoSNotSupported,
			UseAnotherServer, ServerMoved, ConnectionRateExceeded:
			return true
		}
	case PUBACK, PUBREC:
		switch c {
		case Success, NoMatchingSubscribers, UnspecifiedError, ImplementationSpecificError, NotAuthorized,
			TopicNameInvalid, PacketIdentifierInUse, QuotaExceeded, PayloadFormatInvalid:
			return true
		}
	case PUBREL, PUBCOMP:
		return c == Success || c == PacketIdentifierNotFound
	case SUBACK:
		switch c {
		case GrantedQoS0, GrantedQoS1, GrantedQoS2, UnspecifiedError, ImplementationSpecificError,
			NotAuthorized, TopicFilterInvalid, PacketIdentifierInUse, QuotaExceeded,
			SharedSubscriptionsNotSupported, SubscriptionIdentifiersNotSupported,
			WildcardSubscriptionsNotSupported:
			return true
		}
	case UNSUBACK:
		switch c {
		case Success, NoSubscriptionExisted, UnspecifiedError, ImplementationSpecificError, NotAuthorized,
			TopicFilterInvalid, PacketIdentifierInUse:
			return true
		}
	case DISCONNECT:
		switch c {
		case NormalDisconnection, DisconnectWithWill, UnspecifiedError, MalformedPacket, ProtocolError,
			ImplementationSpecificError, NotAuthorized, ServerBusy, ServerShuttingDown, KeepAliveTimeout,
			SessionTakenOver, TopicFilterInvalid, TopicNameInvalid, ReceiveMaximumExceeded,
			TopicAliasInvalid, PacketTooLarge, MessageRateTooHigh, QuotaExceeded, AdministrativeAction,
			PayloadFormatInvalid, RetainNotSupported, QoSNotSupported, UseAnotherServer, ServerMoved,
			SharedSubscriptionsNotSupported, ConnectionRateExceeded, MaximumConnectTime,
			SubscriptionIdentifiersNotSupported, WildcardSubscriptionsNotSupported:
			return true
		}
	case AUTH:
		return c == Success || c == ContinueAuthentication || c == ReAuthenticate
	}
	return false
}

// ReasonAllowed reports whether MQTT 5 lets a packet of type t carry reason
// code c. Layers that choose a code (for example a DISCONNECT after a codec
// error) use it to fall back to UnspecifiedError.
func ReasonAllowed(t Type, c ReasonCode) bool { return reasonAllowed(t, c) }

func checkReason(t Type, c ReasonCode) error {
	if !reasonAllowed(t, c) {
		return malformed(t.String() + ": reason code " + hexByte(byte(c)) + " not defined for this packet")
	}
	return nil
}

// The 3.1.1 CONNACK return codes (3.1.1 §3.2.2.3).
const (
	rcAccepted       = 0
	rcBadVersion     = 1
	rcIDRejected     = 2
	rcUnavailable    = 3
	rcBadCredentials = 4
	rcNotAuthorized  = 5
	subackFailure311 = 0x80
)

// connackCode311 maps an MQTT 5 CONNACK reason code to a 3.1.1 return code.
func connackCode311(c ReasonCode) byte {
	switch c {
	case Success:
		return rcAccepted
	case UnsupportedProtocolVersion:
		return rcBadVersion
	case ClientIdentifierNotValid:
		return rcIDRejected
	case BadUserNameOrPassword:
		return rcBadCredentials
	case NotAuthorized, Banned:
		return rcNotAuthorized
	}
	return rcUnavailable
}

// connackReason5 maps a 3.1.1 return code to the MQTT 5 reason code.
func connackReason5(b byte) (ReasonCode, bool) {
	switch b {
	case rcAccepted:
		return Success, true
	case rcBadVersion:
		return UnsupportedProtocolVersion, true
	case rcIDRejected:
		return ClientIdentifierNotValid, true
	case rcUnavailable:
		return ServerUnavailable, true
	case rcBadCredentials:
		return BadUserNameOrPassword, true
	case rcNotAuthorized:
		return NotAuthorized, true
	}
	return 0, false
}

// subackCode311 maps an MQTT 5 SUBACK reason code to a 3.1.1 return code.
func subackCode311(c ReasonCode) byte {
	if c.IsError() {
		return subackFailure311
	}
	return byte(c)
}

func subackReason5(b byte) (ReasonCode, bool) {
	switch b {
	case 0, 1, 2:
		return ReasonCode(b), true
	case subackFailure311:
		return UnspecifiedError, true
	}
	return 0, false
}

func hexByte(b byte) string {
	const digits = "0123456789ABCDEF"
	return "0x" + string([]byte{digits[b>>4], digits[b&15]})
}
