package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/sextantmq/sextant/internal/atomicfile"
	"github.com/sextantmq/sextant/internal/auth"
)

// PasswdCmd adds, changes or removes a user in a password file. The
// password comes from the terminal (read twice, without echo), else the
// first line of standard input, else --password.
type PasswdCmd struct {
	File     string `name:"file" short:"f" required:"" type:"path" help:"Password file to create or update (written with mode 0600)." placeholder:"FILE"`
	User     string `arg:"" help:"User name."`
	Cost     int    `name:"cost" default:"11" help:"bcrypt cost, 4 to 31: each step doubles the work of every check (and of a guessing attacker)."`
	Password string `name:"password" help:"The password, for scripts; other local users can read it in the process list, so prefer standard input." placeholder:"PASSWORD"`
	Delete   bool   `name:"delete" short:"D" help:"Remove the user instead."`
}

func (c *PasswdCmd) Run(e *env) error {
	if err := auth.ValidUsername(c.User); err != nil {
		return err
	}
	old, err := os.ReadFile(c.File)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	exists := err == nil
	if exists {
		if _, err := auth.ParsePasswords(bytes.NewReader(old)); err != nil {
			return fmt.Errorf("%s: %w", c.File, err)
		}
	}
	if c.Delete {
		out, found := auth.DeleteUser(old, c.User)
		if !found {
			return fmt.Errorf("%s has no user %q", c.File, c.User)
		}
		if err := atomicfile.Write(c.File, out, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "removed %s from %s\n", c.User, c.File)
		return nil
	}
	if c.Cost < bcrypt.MinCost || c.Cost > bcrypt.MaxCost {
		return fmt.Errorf("--cost %d is outside %d..%d", c.Cost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	pw, err := c.password(e)
	if err != nil {
		return err
	}
	hash, err := auth.HashPassword(pw, c.Cost)
	if err != nil {
		return err
	}
	out, err := auth.SetPassword(old, c.User, hash)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(c.File, out, 0o600); err != nil {
		return err
	}
	verb := "added"
	if exists && bytes.Contains(old, []byte(c.User+":")) {
		verb = "updated"
	}
	fmt.Fprintf(e.stdout, "%s %s in %s (send the node SIGHUP to load it)\n", verb, c.User, c.File)
	return nil
}

func (c *PasswdCmd) password(e *env) ([]byte, error) {
	if c.Password != "" {
		fmt.Fprintln(e.stderr, "sextant: warning: --password exposes the password in the process list and shell history; prefer standard input")
		return []byte(c.Password), nil
	}
	if f, ok := e.stdin.(*os.File); ok && isTTY(f) {
		fmt.Fprint(e.stderr, "Password: ")
		p1, err := readNoEcho(f)
		fmt.Fprintln(e.stderr)
		if err != nil {
			return nil, err
		}
		fmt.Fprint(e.stderr, "Again: ")
		p2, err := readNoEcho(f)
		fmt.Fprintln(e.stderr)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(p1, p2) {
			return nil, errors.New("the passwords differ")
		}
		if len(p1) == 0 {
			return nil, errors.New("empty password")
		}
		return p1, nil
	}
	if e.stdin == nil {
		return nil, errors.New("no password: give it on standard input or with --password")
	}
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty password on standard input")
	}
	return []byte(line), nil
}

// readNoEcho reads one line from the terminal f with echo off.
func readNoEcho(f *os.File) ([]byte, error) {
	restore, err := echoOff(f)
	if err != nil {
		return nil, err
	}
	defer restore()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return []byte(strings.TrimRight(line, "\r\n")), nil
}
