// Package fence is fencing on the data path: what a protected resource
// does with the tokens leaseside hands out. A lease alone cannot stop a
// holder that paused past its deadline from writing; the resource's check
// of the token does. Guard is that check; Register is a fenced register
// that records every write it accepted or refused, and CheckHistory proves
// that such a history never let an older token through after a newer one.
//
// For stores: Record keeps the highest token per lease durably in a locked
// file, and WriteFile (the `leaseside write` command) replaces a file only
// under a token no lower than the highest that wrote it.
//
// fence imports no other package of the project: protected resources can
// use it without the rest of leaseside.
package fence
