package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/fence/pgfence"
	"github.com/leaseside/leaseside/fence/redisfence/library"
)

// `leaseside fence`: installs the fences that PostgreSQL and Redis run
// themselves (fence/pgfence, fence/redisfence), or prints them.

func newFenceCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fence",
		Short: "install the fences of PostgreSQL and Redis, or print them",
		Long: `A fenced write is refused by the store itself when its token is lower than
the highest the store has seen for the lease, in one atomic step with the
write. These commands install the store's side once per database or Redis
server (installing again is harmless: it upgrades and keeps the tokens),
or print it for psql or redis-cli. docs/fencing-postgres-redis.md shows the
one-line writes from a shell, Python and Go.`,
		Example: `  leaseside fence postgres install postgres://admin@db.example/app
  leaseside fence redis install redis://127.0.0.1:6379/0
  leaseside fence postgres sql | psql "$URL" -v ON_ERROR_STOP=1`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.Help()
			return exitCode(ExitUsage)
		},
	}
	pg := &cobra.Command{
		Use:   "postgres",
		Short: "the fence of PostgreSQL: leaseside.fence(lease, token)",
		Long: `leaseside.fence(lease, token), called in the transaction of a write before
the write, locks the lease's row of leaseside.tokens, raises SQLSTATE
LS001 naming both tokens when the token is below the lease's highest (the
transaction, and the write with it, is rolled back), and otherwise records
it. 'install' runs the SQL in the database of URL (a libpq URL or
key=value string); 'sql' prints it.`,
		Example: `  leaseside fence postgres install postgres://admin@db.example/app
  leaseside fence postgres sql > leaseside.sql`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.Help()
			return exitCode(ExitUsage)
		},
	}
	rd := &cobra.Command{
		Use:   "redis",
		Short: "the fence of Redis 7: the functions leaseside_set and leaseside_del",
		Long: `FCALL leaseside_set 2 KEY leaseside:fence:LEASE TOKEN VALUE sets KEY, and
FCALL leaseside_del 2 KEY leaseside:fence:LEASE TOKEN deletes it, only if
TOKEN is not below the highest recorded in leaseside:fence:LEASE, which
they raise to TOKEN in the same atomic step; a lower token is refused
(LEASESIDE_STALE, naming both tokens) and writes nothing. 'install' loads
the function library "leaseside" into the server of URL (redis://,
rediss:// or unix://; FUNCTION LOAD REPLACE); 'lua' prints it.`,
		Example: `  leaseside fence redis install redis://:secret@127.0.0.1:6379
  leaseside fence redis lua > leaseside.lua`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.Help()
			return exitCode(ExitUsage)
		},
	}
	pg.AddCommand(
		installCmd(e, "postgres", "install the fence in a PostgreSQL database", `Runs the fence's SQL (the schema leaseside, its table leaseside.tokens,
the functions leaseside.fence and leaseside.highest) in the database of URL,
a libpq URL or key=value string, in one transaction. Connect as a role that
may create a schema there; the functions run as that role (SECURITY
DEFINER), so writers need no right on leaseside.tokens and cannot lower a
token. Running it again upgrades the functions and keeps the tokens.`, "postgres://admin@db.example/app", installPostgres),
		printCmd(e, "postgres sql", "print the SQL that 'install' runs (for psql -f)", `Prints leaseside.sql, the SQL 'install' runs, for psql:
  leaseside fence postgres sql | psql "$URL" -v ON_ERROR_STOP=1`, "leaseside.sql", pgfence.SQL))
	rd.AddCommand(
		installCmd(e, "redis", "load the fence into a Redis server", `Loads the function library "leaseside" (leaseside_set, leaseside_del)
into the Redis 7 server of URL: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB],
rediss://... for TLS, or unix://[[USER]:PASSWORD@]/PATH. Functions are the
server's (every database's), kept in its RDB and AOF and sent to its
replicas. Loading again replaces the library and keeps the tokens.`, "redis://127.0.0.1:6379/0", installRedis),
		printCmd(e, "redis lua", "print the function library that 'install' loads (for redis-cli)", `Prints leaseside.lua, the function library 'install' loads, for redis-cli:
  leaseside fence redis lua | redis-cli -x FUNCTION LOAD REPLACE`, "leaseside.lua", library.Lua))
	cmd.AddCommand(pg, rd)
	return cmd
}

// installCmd is `leaseside fence STORE install URL`: install parses URL
// (a usage error if it cannot) and returns a function that installs.
func installCmd(e *env, store, short, long, example string, install func(url string) (func(context.Context) error, error)) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:     "install URL",
		Short:   short,
		Long:    long,
		Example: "  leaseside fence " + store + " install " + example,
		Args:    exactArgs("URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := install(args[0])
			if err != nil {
				return usagef("URL: %v", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := run(ctx); err != nil {
				return fail(e, err)
			}
			fmt.Fprintf(e.stdout, "installed the leaseside fence (version 1) in %s\n", store)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// printCmd is `leaseside fence STORE WHAT`: it prints text (file).
func printCmd(e *env, path, short, long, file, text string) *cobra.Command {
	f := strings.Fields(path)
	return &cobra.Command{
		Use:     f[1],
		Short:   short,
		Long:    long,
		Example: "  leaseside fence " + path + " > " + file,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(e.stdout, text)
			return nil
		},
	}
}

// installPostgres runs pgfence.SQL in the database of url over pgconn
// alone (the simple protocol takes the whole script at once): the
// binary links no database/sql driver.
func installPostgres(url string) (func(context.Context) error, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		conn, err := pgconn.ConnectConfig(ctx, cfg)
		if err != nil {
			return fmt.Errorf("connecting to PostgreSQL: %w", err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, pgfence.SQL).ReadAll(); err != nil {
			return fmt.Errorf("installing leaseside.sql: %w", err)
		}
		return nil
	}, nil
}

// installRedis loads the function library into the server of url
// (redisLoad).
func installRedis(url string) (func(context.Context) error, error) {
	t, err := parseRedisURL(url)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return redisLoad(ctx, t, library.Lua) }, nil
}
