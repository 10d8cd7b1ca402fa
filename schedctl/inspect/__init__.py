"""What an operator reads and does between deploys: `status`, `missed`, `jobs`, `top`, and the actions that
follow from them (`replay`, `pause`, `resume`, `trigger`). Library functions the CLI prints."""
