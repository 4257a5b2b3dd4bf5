from vgpu.cli import main

main()
