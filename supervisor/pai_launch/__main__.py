from pai_launch.entry import main

main()
