// Package atomicfile replaces small files whole: the data goes to a
// temporary file in the same directory, is synced, and is renamed over the
// target (the directory synced after), so a reader (or a restart after a crash) finds the old file or
// the new one, never a part of one. Used for the password file
// (sextant passwd), the cluster members a node remembers and the fence
// records of migrations.
//
// It holds no state; concurrent writers of one path must be serialised by
// their caller (the last rename wins). Anything may import it except the
// pure cores.
package atomicfile
