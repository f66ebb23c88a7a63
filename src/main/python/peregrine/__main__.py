"""`python -m peregrine`: the same command as `peregrine` (peregrine._launcher)."""

from peregrine._launcher import main

if __name__ == "__main__":
    main()
