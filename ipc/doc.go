// Package ipc is leaseside's local socket protocol: newline-delimited JSON
// over one Unix stream socket, requests with ids, responses that echo them,
// and events pushed on the same connection. It holds the message types
// (messages.go), listening and dialing (socket.go), the server side that
// frames and validates input before any handler sees it (server.go), and a
// Go client whose zero value works (client.go).
//
// PROTOCOL.md next to this file is the contract for clients in any language.
// ipc imports no other package of the project.
package ipc
