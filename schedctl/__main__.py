from schedctl.cli import main

main()
