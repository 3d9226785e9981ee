from knockout.cli.main import main

main()
