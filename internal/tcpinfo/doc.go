// Package tcpinfo reads the kernel's view of a TCP connection (Linux
// TCP_INFO), for measuring a client's round-trip time without any help from
// the client. It owns nothing and never blocks.
package tcpinfo
