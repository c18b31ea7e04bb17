try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while the CLI itself imports: as quiet as one a moment later
    raise SystemExit(130) from None

raise SystemExit(main())
