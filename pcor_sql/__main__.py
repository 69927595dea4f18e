"""`python -m pcor_sql ...` runs the command line, like the `pcor-sql` script."""

from pcor_sql.cli.main import run

if __name__ == "__main__":
    run()
