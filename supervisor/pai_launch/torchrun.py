"""`python -m pai_launch.torchrun ...`: pai-launch taking a torchrun command line, as when it is installed as
`torchrun`."""

from pai_launch.entry import main

if __name__ == "__main__":
    main(as_torchrun=True)
